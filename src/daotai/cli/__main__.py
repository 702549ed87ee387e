"""``python -m daotai.cli``: the same as the ``daotai`` command."""

from daotai.cli import main

if __name__ == "__main__":
    main()
