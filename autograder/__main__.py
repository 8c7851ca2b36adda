"""`python -m autograder` / `autograder`: the instructor CLI."""


def main(argv=None):
    from autograder.cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
