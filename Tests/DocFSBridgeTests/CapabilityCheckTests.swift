import Foundation
import Glibc
import XCTest
@testable import DocFSBridge
import DocFSProvider

final class CapabilityCheckTests: XCTestCase {
    private func item(_ name: String, _ kind: ItemKind = .file, caps: Capabilities, parent: ItemIdentifier = .rootContainer) -> Item {
        Item(
            identifier: ItemIdentifier(name), parentIdentifier: parent, filename: name, kind: kind,
            contentType: kind == .folder ? .folder : .data, creationDate: Date(), contentModificationDate: Date(), capabilities: caps)
    }

    private func errno(_ body: () throws(ProviderError) -> Void) -> Int32? {
        do { try body(); return nil } catch { return error.errno }
    }

    func testAddingNeedsAllowsAddingSubItems() {
        let archive = item("Archive", .folder, caps: [.allowsReading, .allowsContentEnumerating])
        let projects = item("Projects", .folder, caps: .all)
        XCTAssertEqual(errno { () throws(ProviderError) in try CapabilityCheck.add(into: archive) }, EACCES)
        XCTAssertNil(errno { () throws(ProviderError) in try CapabilityCheck.add(into: projects) })
        XCTAssertEqual(errno { () throws(ProviderError) in try CapabilityCheck.add(into: item("f", caps: .all)) }, ENOTDIR)
    }

    func testReadWriteEnumerateAndDelete() {
        let readOnly = item("r", caps: [.allowsReading])
        XCTAssertNil(errno { () throws(ProviderError) in try CapabilityCheck.read(readOnly) })
        XCTAssertEqual(errno { () throws(ProviderError) in try CapabilityCheck.write(readOnly) }, EACCES)
        XCTAssertEqual(errno { () throws(ProviderError) in try CapabilityCheck.delete(readOnly) }, EPERM)
        XCTAssertEqual(errno { () throws(ProviderError) in try CapabilityCheck.read(item("n", caps: [])) }, EACCES)
        XCTAssertEqual(errno { () throws(ProviderError) in try CapabilityCheck.enumerate(item("d", .folder, caps: [.allowsReading])) }, EACCES)
    }

    func testMoveRules() {
        let a = item("A", .folder, caps: .all)
        let b = item("B", .folder, caps: .all)
        let closed = item("C", .folder, caps: [.allowsReading, .allowsContentEnumerating])
        let fixedName = item("x", caps: [.allowsReading, .allowsReparenting, .allowsDeleting])
        let fixedPlace = item("y", caps: [.allowsReading, .allowsRenaming])
        let undeletable = item("z", caps: [.allowsReading])
        // rename in place needs allowsRenaming
        XCTAssertEqual(
            errno { () throws(ProviderError) in try CapabilityCheck.move(fixedName, from: a, to: a, renaming: true, replacing: nil) }, EPERM)
        XCTAssertNil(errno { () throws(ProviderError) in try CapabilityCheck.move(fixedPlace, from: a, to: a, renaming: true, replacing: nil) })
        // moving elsewhere needs allowsReparenting, and the destination's allowsAddingSubItems
        XCTAssertEqual(
            errno { () throws(ProviderError) in try CapabilityCheck.move(fixedPlace, from: a, to: b, renaming: false, replacing: nil) }, EPERM)
        XCTAssertNil(errno { () throws(ProviderError) in try CapabilityCheck.move(fixedName, from: a, to: b, renaming: false, replacing: nil) })
        XCTAssertEqual(
            errno { () throws(ProviderError) in try CapabilityCheck.move(fixedName, from: a, to: closed, renaming: false, replacing: nil) }, EACCES)
        // moving elsewhere under a new name also needs allowsRenaming
        XCTAssertEqual(
            errno { () throws(ProviderError) in try CapabilityCheck.move(fixedName, from: a, to: b, renaming: true, replacing: nil) }, EPERM)
        // replacing needs the replaced item's allowsDeleting
        XCTAssertEqual(
            errno { () throws(ProviderError) in try CapabilityCheck.move(fixedPlace, from: a, to: a, renaming: true, replacing: undeletable) }, EPERM)
        XCTAssertNil(errno { () throws(ProviderError) in try CapabilityCheck.move(fixedPlace, from: a, to: a, renaming: true, replacing: fixedName) })
    }

    func testPermissionBitsTellTheTruth() {
        XCTAssertEqual(Attributes.permissions(of: item("f", caps: .all)), 0o644)
        XCTAssertEqual(Attributes.permissions(of: item("f", caps: [.allowsReading])), 0o444)
        XCTAssertEqual(Attributes.permissions(of: item("f", caps: [])), 0o000)
        XCTAssertEqual(Attributes.permissions(of: item("d", .folder, caps: .all)), 0o755)
        XCTAssertEqual(Attributes.permissions(of: item("d", .folder, caps: [.allowsReading, .allowsContentEnumerating])), 0o555)
        XCTAssertEqual(Attributes.permissions(of: item("d", .folder, caps: [.allowsAddingSubItems])), 0o311)
    }

    func testFolderLinkCountCountsSubfolders() {
        var d = item("d", .folder, caps: .all)
        d.childFolderCount = 3
        let st = Attributes().stat(of: d, ino: 7)
        XCTAssertEqual(st.st_nlink, 5)
        XCTAssertEqual(st.st_mode & S_IFMT, S_IFDIR)
        XCTAssertEqual(st.st_ino, 7)
    }

    func testNamesAreCheckedBeforeUse() {
        func check(_ bytes: [UInt8]) -> Int32? {
            let c = bytes.map { CChar(bitPattern: $0) } + [0]
            return c.withUnsafeBufferPointer { p -> Int32? in
                do throws(ProviderError) { _ = try Bridge.name(p.baseAddress!); return nil } catch { return error.errno }
            }
        }
        XCTAssertNil(check(Array("report.pdf".utf8)))
        XCTAssertNil(check(Array(String(repeating: "a", count: 255).utf8)))
        XCTAssertEqual(check(Array(String(repeating: "a", count: 256).utf8)), ENAMETOOLONG)
        XCTAssertEqual(check([0x66, 0xff, 0x6f]), EILSEQ)
    }
}
