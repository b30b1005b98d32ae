"""The checked-in JSON Schemas of the app's methods (params and result of each) and of the MCP tools (input and
output of each), for clients written without this package. `python -m wardian.protocol.schemas` writes them from
the method table and the tool table (`generate`); `--check` exits 1 when a checked-in file differs."""
