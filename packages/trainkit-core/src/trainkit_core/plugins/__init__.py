"""The plugin system: the hook specs, the plugin manager, the provider facade and job placement."""
