"""The one exception type the command line turns into a one-line error."""

# Exit statuses of `coz run` when the program itself never ran, as `env` and
# `timeout` use them, so that scripts can tell them from the program's status.
EXIT_LAUNCHER_ERROR = 125   # coz's own error: a bad option, libcoz.so missing, ...
EXIT_CANNOT_EXECUTE = 126   # the program exists but cannot be executed
EXIT_NOT_FOUND = 127        # the program (or its #! interpreter) does not exist

EXIT_USER_ERROR = 2         # any other subcommand's error (argparse's status)


class CozError(Exception):
    """A user-facing error: its message is printed as `coz: error: <message>`.

    `hint` is an optional second line telling the user what to do. `status` is
    the exit status; None leaves it to the subcommand (125 for `coz run`, 2 for
    the others).
    """

    def __init__(self, message, hint=None, status=None):
        super().__init__(message)
        self.hint = hint
        self.status = status
