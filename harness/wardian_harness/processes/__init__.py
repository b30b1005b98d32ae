"""The processes a test starts and always reaps: a real `wardian app run` (`apps`, with the records that end one a
killed test left behind, `app_records`), a run's process tree (`proctree`), and a program on a terminal whose screen
a test reads (`terminal`)."""
