import Foundation
import XCTest

/// docs/ARCHITECTURE.md stays true: every module and every source file is named in it, every
/// `Sources/…` path it names exists, every docs/ page README links to is there, and no source
/// file grows past 600 lines.
final class ArchitectureDocTests: XCTestCase {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    func text(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    func testEveryModuleAndSourceFileIsNamedAndEveryNamedPathExists() throws {
        let doc = try text("docs/ARCHITECTURE.md")
        let fm = FileManager.default
        let sources = root.appendingPathComponent("Sources")
        for module in try fm.contentsOfDirectory(atPath: sources.path) {
            XCTAssert(doc.contains("Sources/" + module), "docs/ARCHITECTURE.md does not name Sources/\(module)")
        }
        let files = fm.enumerator(atPath: sources.path)?.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") } ?? []
        XCTAssertGreaterThan(files.count, 50)
        for file in files {
            let name = (file as NSString).lastPathComponent
            let base = String(name.dropLast(".swift".count))
            let named = name == "main.swift" ? doc.contains("Sources/" + file) : doc.contains(name) || doc.contains("`\(base)`")
            XCTAssert(named, "docs/ARCHITECTURE.md does not name Sources/\(file)")
        }
        let regex = try NSRegularExpression(pattern: "Sources/[A-Za-z0-9_/+.\\-]*[A-Za-z0-9_]")
        for match in regex.matches(in: doc, range: NSRange(doc.startIndex..., in: doc)) {
            let path = String(doc[Range(match.range, in: doc)!])
            XCTAssert(fm.fileExists(atPath: root.appendingPathComponent(path).path), "docs/ARCHITECTURE.md names \(path), which does not exist")
        }
    }

    /// The layer diagram (the first code block) names only modules that exist, and every
    /// library module is in it; every source folder, subfolders too, is described by its path.
    func testTheDiagramNamesTheModulesAndEveryFolderIsDescribed() throws {
        let doc = try text("docs/ARCHITECTURE.md")
        let fm = FileManager.default
        let sources = root.appendingPathComponent("Sources")
        let diagram = try XCTUnwrap(doc.components(separatedBy: "```").dropFirst().first, "the layer diagram")
        let regex = try NSRegularExpression(pattern: "\\b(CFuse|DocFS[A-Za-z]*)\\b")
        let named = Set(
            regex.matches(in: diagram, range: NSRange(diagram.startIndex..., in: diagram)).map {
                String(diagram[Range($0.range, in: diagram)!])
            })
        let modules = try fm.contentsOfDirectory(atPath: sources.path).filter { $0 == "CFuse" || $0.hasPrefix("DocFS") }
        for module in named {
            XCTAssert(modules.contains(module), "the diagram names \(module), which is not a module in Sources/")
        }
        for module in modules {
            XCTAssert(named.contains(module), "the diagram does not show \(module)")
        }
        let folders =
            fm.enumerator(atPath: sources.path)?.compactMap { $0 as? String }.filter { path in
                var isFolder: ObjCBool = false
                return fm.fileExists(atPath: sources.appendingPathComponent(path).path, isDirectory: &isFolder) && isFolder.boolValue
            } ?? []
        XCTAssertGreaterThan(folders.count, 10)
        for folder in folders {
            XCTAssert(doc.contains("`Sources/\(folder)`"), "docs/ARCHITECTURE.md does not describe the folder Sources/\(folder)")
        }
    }

    /// Small files with one role: none over 600 lines (split by role when one grows past it).
    func testNoSourceFileIsOver600Lines() throws {
        let sources = root.appendingPathComponent("Sources")
        let files = FileManager.default.enumerator(atPath: sources.path)?.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") } ?? []
        for file in files {
            let lines = try String(contentsOf: sources.appendingPathComponent(file), encoding: .utf8).split(
                separator: "\n", omittingEmptySubsequences: false
            ).count
            XCTAssertLessThanOrEqual(lines, 601, "Sources/\(file) has \(lines) lines")
        }
    }

    func testReadmeLinksPagesThatExist() throws {
        let readme = try text("README.md")
        let regex = try NSRegularExpression(pattern: "\\]\\((docs/[A-Za-z]+\\.md)\\)")
        let pages = regex.matches(in: readme, range: NSRange(readme.startIndex..., in: readme)).map {
            String(readme[Range($0.range(at: 1), in: readme)!])
        }
        XCTAssertGreaterThanOrEqual(Set(pages).count, 5, "README links its docs/ pages")
        for page in pages {
            XCTAssert(FileManager.default.fileExists(atPath: root.appendingPathComponent(page).path), "README links \(page), which does not exist")
        }
    }
}
