"""The console's pages, one module each: its routes and their handlers. A handler reads the request, calls the app's
method table through the shared `ConsoleContext`, and renders what the presenters shape from the results."""
