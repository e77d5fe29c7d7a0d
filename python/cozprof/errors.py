"""The one exception type the command line turns into a one-line error."""


class CozError(Exception):
    """A user-facing error: its message is printed as `coz: error: <message>`.

    `hint` is an optional second line telling the user what to do.
    """

    def __init__(self, message, hint=None, status=2):
        super().__init__(message)
        self.hint = hint
        self.status = status
