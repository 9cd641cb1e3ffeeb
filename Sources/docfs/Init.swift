import ArgumentParser
import Foundation
import DocFSStore

struct Init: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create a store (a new path or an existing empty directory).")

    @Argument(help: "Where to create the store.")
    var store: String

    @Option(help: "A layout file (YAML or JSON) declaring folders, their capabilities and allowed types.")
    var layout: String?

    func run() throws {
        let layoutValue: Layout?
        var templates: [(identifier: String, file: String, source: Templates.Contents)] = []
        if let layout {
            let url = URL(fileURLWithPath: layout)
            do { layoutValue = try Layout.load(from: url) } catch {
                throw UserFacingError("docfs: cannot use layout \(layout): \(error)")
            }
            // Templates for `docfs new`, checked before the store is made.
            if let layoutValue { templates = try Templates.plan(for: layoutValue, layoutFile: url) }
        } else {
            layoutValue = nil
        }
        do { try LocalStore.create(at: URL(fileURLWithPath: store), layout: layoutValue) } catch {
            throw UserFacingError("docfs: cannot create store at \(store): \(error)")
        }
        try Templates.install(templates, store: store)
    }
}
