"""The CLI's exit codes, one per branch of the error tree (a documented interface: scripts branch on them)."""

from __future__ import annotations

from wardian import errors

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_APP = 3
EXIT_NOT_FOUND = 4
EXIT_UNCERTAIN = 5
EXIT_STORAGE = 6
EXIT_HOME = 7
EXIT_NOTHING = 8
EXIT_NOT_SIGNED_IN = 9

_NOT_FOUND = (errors.UnknownTarget, errors.UnknownAgent, errors.UnknownRequest, errors.UnknownSession,
              errors.SessionHomeMismatch, errors.StaleSession, errors.UnknownCredential, errors.UnknownApproval)


def exit_code_for(exc: errors.WardianError) -> int:
    if isinstance(exc, _NOT_FOUND):
        return EXIT_NOT_FOUND
    if isinstance(exc, errors.NotActive):
        return EXIT_NOTHING
    if isinstance(exc, errors.NotSignedIn):
        return EXIT_NOT_SIGNED_IN
    if isinstance(exc, errors.RequestError):
        return EXIT_USAGE
    if isinstance(exc, errors.TransportError):
        return EXIT_APP
    if isinstance(exc, errors.DeliveryUncertain):
        return EXIT_UNCERTAIN
    if isinstance(exc, errors.StorageError):
        return EXIT_STORAGE
    if isinstance(exc, errors.HomeError):
        return EXIT_HOME
    return EXIT_INTERNAL
