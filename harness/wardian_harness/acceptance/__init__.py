"""The native acceptance: real agents in an isolated run (`homes`), driven through the wardian CLI as a person drives
them (`native`; two hosts of one shared store, `two_hosts`), its runner (`runner`, the `run-native-e2e` command), the
evidence report (`report`) and `wardian demo` (`demo`), which plays the same exchange live."""
