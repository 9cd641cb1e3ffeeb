#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import Foundation
import DocFSProvider
import DocFSContentTypes
import GRDB
import Logging

// Metadata of one item: tags, favourite rank, last-used date, mode, owner and times.
extension LocalStore: AppleMetadataProvider {
    /// Changes metadata of one item (one transaction, one new metadata version).
    private func updateSync(
        _ identifier: ItemIdentifier, _ what: String, _ change: (inout Record) throws(ProviderError) -> Void
    ) throws(ProviderError) -> Item {
        return try write { (database) throws(ProviderError) -> Item in
            let row = try self.itemRow(identifier)
            var record = try read { (tree) throws(ProviderError) -> Record in
                guard let record = tree.records[row] else { throw ProviderError(.noSuchItem, "no item with identifier '\(identifier)'") }
                return record
            }
            try change(&record)
            record.item.noteMetadataChange(at: FileTime.now())
            try commit(database, saving: [record], what)
            return tree.update { tree -> Item in
                tree.replaceKeepingCounts(record)
                return tree.records[row]!.item
            }
        }
    }

    /// Stores (or clears) the item's tag data: a new metadata version.
    package func setTagData(_ tagData: Data?, forItemIdentifier identifier: ItemIdentifier) async throws(ProviderError) -> Item {
        try updateSync(identifier, "set tags") { $0.item.tagData = tagData }
    }

    /// Stores (or clears) the item's favourite rank: a new metadata version.
    package func setFavoriteRank(_ rank: Int64?, forItemIdentifier identifier: ItemIdentifier) async throws(ProviderError) -> Item {
        try updateSync(identifier, "set favorite rank") { $0.item.favoriteRank = rank }
    }

    /// Stores (or clears) the item's last-used date (its access time).
    package func setLastUsedDate(_ date: Date?, forItemIdentifier identifier: ItemIdentifier) async throws(ProviderError) -> Item {
        try updateSync(identifier, "set last-used date") { $0.item.lastUsedDate = date }
    }

    /// chmod, chown, chgrp, utimensat as the bridge passes them (its rules applied): one commit,
    /// the change time moves. The mode of a symbolic link cannot change (`.unsupported`).
    package func setAttributes(ofItemWithIdentifier identifier: ItemIdentifier, changes: AttributeChanges) async throws(ProviderError) -> Item {
        try updateSync(identifier, "set attributes") { (record) throws(ProviderError) in
            if changes.posixPermissions != nil, record.item.kind == .symlink {
                throw ProviderError(.unsupported, "the mode of a symbolic link cannot change")
            }
            changes.apply(to: &record.item)
        }
    }
}

// Stored `user.*` extended attributes (the `xattr` table, read from SQLite when asked: they are
// written straight to it, and programs ask for them far less often than for attributes).
extension LocalStore: ExtendedAttributeProvider {
    package func extendedAttributeNames(of identifier: ItemIdentifier) throws(ProviderError) -> [String] {
        let row = try itemRow(identifier)
        let names: [String]? = tree.reading { tree in
            tree.records[row] == nil ? nil : Array(tree.reader?.attributes(of: row).keys ?? [:].keys)
        }
        guard let names else { throw ProviderError(.noSuchItem, "no item with identifier '\(identifier)'") }
        return names.sorted()
    }

    package func extendedAttribute(named name: String, of identifier: ItemIdentifier) throws(ProviderError) -> Data {
        let row = try itemRow(identifier)
        let found: (exists: Bool, value: Data?) = tree.reading { tree in
            (tree.records[row] != nil, tree.reader?.attributes(of: row)[name])
        }
        guard found.exists else { throw ProviderError(.noSuchItem, "no item with identifier '\(identifier)'") }
        guard let value = found.value else { throw ProviderError(.noSuchAttribute, "\(name) is not set") }
        return value
    }

    package func setExtendedAttribute(
        named name: String, to value: Data?, mode: ExtendedAttributes.WriteMode,
        forItemIdentifier identifier: ItemIdentifier
    ) async throws(ProviderError) {
        try ExtendedAttributes.checkStorable(name, value)
        try write { (database) throws(ProviderError) in
            let row = try self.itemRow(identifier)
            let current = try read { (tree) throws(ProviderError) -> [String: Data] in
                guard tree.records[row] != nil else { throw ProviderError(.noSuchItem, "no item with identifier '\(identifier)'") }
                return tree.reader?.attributes(of: row) ?? [:]
            }
            _ = try ExtendedAttributes.updating(current, name, to: value, mode: mode)
            do {
                // The row this attribute belongs to may still be only in the journal.
                try flushJournal(database)
                try database.inDatabase { db in
                    if let value {
                        try db.execute(
                            sql:
                                "INSERT INTO xattr (item, name, value) VALUES (?, ?, ?) ON CONFLICT(item, name) DO UPDATE SET value = excluded.value",
                            arguments: [row, name, value])
                    } else {
                        try db.execute(sql: "DELETE FROM xattr WHERE item = ? AND name = ?", arguments: [row, name])
                    }
                }
            } catch let error as ProviderError {
                throw error
            } catch let error as DatabaseError {
                throw StoreWriter.providerError(error, "set attribute \(name)")
            } catch {
                throw ProviderError(.ioError, "set attribute \(name): \(error)")
            }
            // A change of metadata: the item's change time moves (through the journal, as usual).
            if var record = tree.record(row) {
                record.item.noteMetadataChange(at: FileTime.now())
                try commit(database, saving: [record], "set attribute \(name)")
                tree.replaceKeepingCounts([record])
            }
        }
    }

    /// How many stored attributes the store holds in all (for tests and `docfs check`).
    var storedAttributeCount: Int {
        try? write { (database) throws(ProviderError) in try flushJournal(database) }
        return tree.count("SELECT COUNT(*) FROM xattr") ?? 0
    }
}

// Content types in the store: admission by name (before anything is written), by bytes and
// document type at import and at each new content version, on moves, and packages' sizes.
//
// Which folders are restricted: a folder with `allowedContentTypes` in the layout, and every
// folder below it (subfolders inherit the rule for what goes into them), except inside a package
// — a package is one document, and what is inside it is its own business.
extension LocalStore {
    package func supertypes(of type: ContentType) -> [ContentType] {
        types.registry.supertypes(of: type)
    }

    /// The rule for new items in folder `row`: the nearest layout folder at or above it that
    /// declares `allowedContentTypes`; nil when there is none, or when a package is in between.
    func contentRule(forFolder row: Int64, in tree: borrowing TreeState) -> ContentTypeTable.FolderRule? {
        guard types.hasRules else { return nil }
        var names: [String] = []
        var cursor: Int64? = row
        var steps = 0
        while let current = cursor, current != Self.rootRow, steps < 4096 {
            guard let record = tree.records[current] else { return nil }
            if current == Self.trashRow { return nil }
            if record.item.isFolder, record.item.contentType != .folder, types.registry.isPackage(record.item.contentType) {
                return nil
            }
            names.append(record.item.filename)
            cursor = record.parent
            steps += 1
        }
        // Deepest declared folder first.
        var components = Array(names.reversed())
        while !components.isEmpty {
            if let rule = types.rules[components.joined(separator: "/")] { return rule }
            components.removeLast()
        }
        return nil
    }

    private func contentRule(forFolder row: Int64) -> ContentTypeTable.FolderRule? {
        guard types.hasRules else { return nil }
        return tree.reading { tree in contentRule(forFolder: row, in: tree) }
    }

    // MARK: - Admission by name

    /// Refuses, before anything is written, an item whose name already tells that its folder
    /// will not take it. A file whose name says nothing is left to the bytes (checked at import).
    package func admitItem(named name: String, kind: ItemKind, into parent: ItemIdentifier) throws(ProviderError) {
        guard types.hasRules, let row = self.row(for: parent), let rule = contentRule(forFolder: row) else { return }
        try admit(named: name, kind: kind, by: rule)
    }

    private func admit(named name: String, kind: ItemKind, by rule: ContentTypeTable.FolderRule) throws(ProviderError) {
        switch kind {
        case .folder:
            let type = types.detector.type(forFolderNamed: name)
            if type == .folder {
                if rule.subfolders || rule.admits(.folder, in: types.registry) { return }
                throw ProviderError(
                    .typeNotAllowed,
                    "subfolders are not allowed here: the folder takes only \(rule.allowedList) (rule of /\(rule.path), subfolders: false)")
            }
            if !rule.admits(type, in: types.registry) { throw types.refusal(type, by: rule) }
        case .symlink:
            if !rule.admits(.symbolicLink, in: types.registry) { throw types.refusal(.symbolicLink, by: rule) }
        case .fifo, .socket, .characterDevice, .blockDevice:
            // Not documents: only a folder without a list of allowed types takes them.
            throw ProviderError(
                .typeNotAllowed, "FIFOs and sockets are not documents: the folder takes only \(rule.allowedList) (rule of /\(rule.path))")
        case .file:
            let candidates = types.detector.candidates(forFilename: name)
            guard let first = candidates.first else { return }
            if !candidates.contains(where: { rule.admits($0.type, in: types.registry) }) {
                throw types.refusal(first.type, by: rule, detail: " (from the name '\(name)')")
            }
        }
    }

    // MARK: - Admission by bytes

    /// Types the planned items of an import from their bytes, checks them against the rule of the
    /// folder they go into and validates them with their document type. Runs before anything is
    /// moved into the store, so a refusal leaves nothing behind. `items[0]` is the top item;
    /// folders come before their contents.
    /// `contents`: the bytes of a single file imported from memory (no staged file to read).
    /// `lazily` (a copy through the mount): a file no rule checks is left undetected
    /// (`undetectedType`) and typed when first asked (`contentType(of:)`), not in every close.
    func admitImport(
        _ items: [(record: Record, source: String)], into parent: Record,
        contents: [UInt8]? = nil, lazily: Bool = false
    ) throws(ProviderError) -> [Record] {
        let topRule = contentRule(forFolder: parent.row)
        let policy = parent.contentsPolicy ?? .all
        // Folders of the import that pass a rule on to what is inside them.
        var ruleByFolder: [Int64: ContentTypeTable.FolderRule] = [:]
        var result: [Record] = []
        result.reserveCapacity(items.count)
        for (record, source) in items {
            var record = record
            let rule: ContentTypeTable.FolderRule?
            if record.parent == parent.row {
                rule = topRule
            } else {
                rule = record.parent.flatMap { ruleByFolder[$0] }
            }
            let detection: Detection
            switch record.item.kind {
            case .folder:
                detection = Detection(type: types.detector.type(forFolderNamed: record.item.filename), source: .name)
                let isPackage = detection.type != .folder
                if let rule {
                    try admit(named: record.item.filename, kind: .folder, by: rule)
                }
                // Inside a package nothing is restricted; a plain folder passes its rule on.
                if !isPackage, let rule { ruleByFolder[record.row] = rule }
                if isPackage, rule != nil {
                    try types.documents.validate(try FileWrapper(url: URL(fileURLWithPath: source)), as: detection.type, in: types.registry)
                }
            case .symlink:
                detection = Detection(type: .symbolicLink, source: .name)
                if let rule, !rule.admits(.symbolicLink, in: types.registry) { throw types.refusal(.symbolicLink, by: rule) }
            case .fifo, .socket, .characterDevice, .blockDevice:
                detection = Detection(type: .item, source: .name)
                if let rule { try admit(named: record.item.filename, kind: record.item.kind, by: rule) }
            case .file:
                if lazily, rule == nil, types.detectsLazily {
                    record.item.contentType = Self.undetectedType
                    record.item.capabilities = policy
                    result.append(record)
                    continue
                }
                // planImport has just seen it as a regular file of this size.
                if let contents {
                    detection = types.detector.detect(name: record.item.filename, contents: contents)
                } else {
                    detection = try types.detector.detect(
                        regularFileAt: source, name: record.item.filename,
                        size: record.item.documentSize)
                }
                if let rule {
                    try check(detection, of: record.item.filename, by: rule)
                    if record.item.documentSize > 0 { try validate(source, contents: contents, as: detection.type) }
                }
            }
            record.item.contentType = detection.type
            record.item.capabilities = types.capabilities(policy, for: detection.type)
            if logger.logLevel <= .debug {
                logger.debug("import \(record.item.filename): type \(detection)")
            }
            result.append(record)
        }
        return result
    }

    /// A new content version of `record` from the staged file at `source`: its type from the
    /// bytes, checked against its folder's rule and validated like an import.
    /// Without a rule, the type is left to the first reader, as for an import.
    func admitModified(_ record: Record, from source: String) throws(ProviderError) -> Record {
        var record = record
        let rule = record.parent.flatMap { contentRule(forFolder: $0) }
        if rule == nil, types.detectsLazily {
            record.item.contentType = Self.undetectedType
            return record
        }
        let detection = try types.detector.detect(fileAt: source, name: record.item.filename)
        if let rule {
            try check(detection, of: record.item.filename, by: rule)
            var size = stat()
            if lstat(source, &size) == 0, size.st_size > 0 { try validate(source, as: detection.type) }
        }
        record.item.contentType = detection.type
        return record
    }

    private func check(_ detection: Detection, of name: String, by rule: ContentTypeTable.FolderRule) throws(ProviderError) {
        guard !rule.admits(detection.type, in: types.registry) else { return }
        var detail = ""
        if let named = detection.typeFromName, named != detection.type {
            detail = " (the name '\(name)' says \(named.identifier), the contents say \(detection.type.identifier))"
        } else {
            detail = " (from \(detection.source.rawValue))"
        }
        throw types.refusal(detection.type, by: rule, detail: detail)
    }

    /// Reads the file as a document of `type`; a document type that cannot read it refuses it as
    /// a corrupt file (EIO at close).
    private func validate(_ source: String, contents: [UInt8]? = nil, as type: ContentType) throws(ProviderError) {
        guard types.documents.documentType(for: type, in: types.registry) != nil else { return }
        do throws(ProviderError) {
            let wrapper: FileWrapper
            if let contents {
                wrapper = FileWrapper(regularFileWithContents: Data(contents))
            } else {
                wrapper = try FileWrapper(url: URL(fileURLWithPath: source))
            }
            try types.documents.validate(wrapper, as: type, in: types.registry)
        } catch  where error.code == .corruptFile {
            throw ProviderError(.corruptFile, "not a valid \(type.identifier) document: \(error.reason)")
        }
    }

    // MARK: - Detection left to the first reader

    /// The type of a file whose import left it undetected (`admitImport(lazily:)`): no rule
    /// needed it then, and detecting it in every close cost 5% of the daemon's CPU in a `cp -r`.
    static let undetectedType = ContentType("org.docfs.undetected")

    /// The item's type, detected from its stored bytes now when its import left it undetected
    /// (getxattr `user.docfs.type`, `docfs info`, a replica's upload). Not stored: the bytes and
    /// name it depends on do not change without a new version or a rename, which detect again.
    package func contentType(of item: Item) -> ContentType {
        guard item.contentType == Self.undetectedType else { return item.contentType }
        guard let row = self.row(for: item.identifier),
            let record = tree.reading({ tree -> Record? in
                // A file's other name reads as the file (its bytes are the target row's).
                let found = tree.record(tree.resolve(row))
                return found?.linkOf.flatMap { tree.record($0) } ?? found
            })
        else {
            return types.detector.detect(name: item.filename, contents: []).type
        }
        return detectedType(of: record)
    }

    /// What the import would have found: the same detection, on the stored bytes (a segment's
    /// entry or the content file, which keeps the staged file's `user.mime_type`) under the name
    /// the file had.
    func detectedType(of record: Record) -> ContentType {
        guard record.item.contentType == Self.undetectedType else { return record.item.contentType }
        let name = record.item.filename
        do throws(ProviderError) {
            if record.item.documentSize == 0 { return types.detector.detect(name: name, contents: []).type }
            if let bytes = try contents.segments.read(record.row) { return types.detector.detect(name: name, contents: bytes).type }
            return try types.detector.detect(regularFileAt: contents.path(record.row), name: name, size: record.item.documentSize).type
        } catch {
            // Contents not here (a replica's evicted file): the name alone.
            logger.notice("\(name): type from the name alone: \(error.reason)")
            return types.fileType(forFilename: name)
        }
    }

    /// `ContentTypeTable.retyped` for a rename of `record` to `name`: a new name that says
    /// nothing keeps the type the bytes gave under the old one, so an undetected type is
    /// detected first, under the old name.
    func retyped(_ record: Record, as item: Item, name: String, policy: Capabilities?) -> Item {
        var item = item
        if item.contentType == Self.undetectedType, item.kind == .file, types.detector.type(forFilename: name) == nil {
            item.contentType = detectedType(of: record)
        }
        return types.retyped(item, name: name, policy: policy)
    }

    // MARK: - Moves

    /// A move of `moved` into folder `destination`: the folder's rule applies to the item and,
    /// for a plain folder, to everything in it (packages count as one document).
    func checkMove(_ moved: Record, into destination: Int64, in tree: borrowing TreeState) throws(ProviderError) {
        guard types.hasRules, let rule = contentRule(forFolder: destination, in: tree) else { return }
        try checkTree(moved, by: rule, in: tree)
    }

    private func checkTree(_ record: Record, by rule: ContentTypeTable.FolderRule, in tree: borrowing TreeState) throws(ProviderError) {
        switch record.item.kind {
        case .fifo, .socket, .characterDevice, .blockDevice:
            try admit(named: record.item.filename, kind: record.item.kind, by: rule)
        case .file, .symlink:
            let type = detectedType(of: record)
            if !rule.admits(type, in: types.registry) {
                throw types.refusal(type, by: rule, detail: " (\(tree.path(of: record.row)))")
            }
        case .folder:
            if record.item.contentType != .folder {
                if !rule.admits(record.item.contentType, in: types.registry) { throw types.refusal(record.item.contentType, by: rule) }
                return
            }
            if !rule.subfolders, !rule.admits(.folder, in: types.registry) {
                throw ProviderError(
                    .typeNotAllowed,
                    "subfolders are not allowed here: the folder takes only \(rule.allowedList) (rule of /\(rule.path), subfolders: false)")
            }
            for child in tree.childRows(of: record.row) {
                if let childRecord = tree.records[child] { try checkTree(childRecord, by: rule, in: tree) }
            }
        }
    }
}

extension TreeState {
    /// An item as readers see it: a package reports the bytes of everything inside it as its
    /// documentSize (summed when asked, so it is always current).
    func presented(_ record: Record) -> Item {
        // A name row reads as the item it names, under its own name and folder.
        if let named = record.linkOf {
            guard let target = self.record(named) else { return record.item }
            var item = target.item
            item.filename = record.item.filename
            item.parentIdentifier = record.item.parentIdentifier
            return item
        }
        guard record.item.kind == .folder, record.item.contentType != .folder, record.row > LocalStore.trashRow else {
            return record.item
        }
        var item = record.item
        item.documentSize = contentSize(under: record.row)
        return item
    }

    /// The bytes of the files and symbolic links below `row`.
    func contentSize(under row: Int64) -> Int64 {
        var total: Int64 = 0
        var stack = [row]
        var visited = 0
        while let next = stack.popLast(), visited < 1_000_000 {
            visited += 1
            for child in childRows(of: next) {
                guard let record = record(child) else { continue }
                if record.item.isFolder { stack.append(child) } else { total += record.item.documentSize }
            }
        }
        return total
    }
}
