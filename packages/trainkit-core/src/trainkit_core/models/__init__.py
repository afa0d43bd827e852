"""Models: the base-model catalogue (presets, twins, chat formats, quantisation) and trained models (`trained`)."""
