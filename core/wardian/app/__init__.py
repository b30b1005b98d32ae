"""The running app: the only owner of a home's store and control socket."""
