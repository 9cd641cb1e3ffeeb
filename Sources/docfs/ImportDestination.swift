/// Where `docfs import` puts its files: a folder inside a mount, or a store that is not mounted.
protocol ImportDestination {
    func importItem(_ source: ImportSource, progress: inout ImportProgress) -> ImportOutcome
    func close()
}

/// What became of one FILE argument: its identifier, the refusal's reason, or Ctrl-C.
enum ImportOutcome {
    case imported(String)
    case refused(String)
    case cancelled
}
