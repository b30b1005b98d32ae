"""What the console's pages show, computed from the app's results: a record's facts and explanations (`records`),
the request view's sequence diagram (`diagram`), and the rows of the live views (`views`). Pure functions of the
results: the pages call the app, these shape what the templates render.
"""
