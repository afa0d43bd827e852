"""The command that regenerates the Modal images' locks: ``python -m trainkit_modal.lock_images [--check]``.

`nox -s modal_locks` runs it. What the locks are and why: `trainkit_modal.locking`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from trainkit_core.errors import UsageError
from trainkit_modal.locking import check_lock, generate, lock_path, read_lock, unmet


def main(argv: Sequence[str] | None = None) -> int:
    """Write the locks, or (``--check``) resolve them again."""
    import argparse
    import tempfile

    from trainkit_modal.spec import load_stack, requested_packages

    parser = argparse.ArgumentParser(
        prog="python -m trainkit_modal.lock_images", description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument("--check", action="store_true", help="resolve the locks again and check they are current")
    parser.add_argument(
        "--locks-dir",
        type=Path,
        default=None,
        help="where to write the locks (default: this package's locks folder; from an installed wheel, "
        "pass the repository's packages/trainkit-modal/src/trainkit_modal/locks)",
    )
    args = parser.parse_args(argv)
    stack = load_stack()
    requested = requested_packages(stack)
    with tempfile.TemporaryDirectory(prefix="trainkit-locks-") as tmp:
        try:
            if args.check:
                for image in requested:
                    lock = read_lock(image)
                    if missing := unmet(lock, requested[image]):
                        raise UsageError(f"the {image} lock is stale: it does not satisfy {', '.join(missing)}")
                    check_lock(lock, Path(tmp))
                    print(f"{image}: {len(lock.pins)} packages resolve together ({len(lock.left_out)} left out)")
                return 0
            for image, lock in generate(requested, stack.python, Path(tmp)).items():
                target = args.locks_dir / lock_path(image).name if args.locks_dir else lock_path(image)
                target.write_text(lock.text())
                print(f"{image}: {len(lock.pins)} packages -> {target}")
        except UsageError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
