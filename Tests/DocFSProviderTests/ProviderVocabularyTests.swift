import Glibc
import XCTest
@testable import DocFSProvider

final class ProviderVocabularyTests: XCTestCase {
    func testCapabilityWordsRoundTrip() throws {
        let caps = try Capabilities(words: ["read", "enumerate", "add"])
        XCTAssertEqual(caps, [.allowsReading, .allowsContentEnumerating, .allowsAddingSubItems])
        XCTAssertEqual(caps.wordList, ["read", "add", "enumerate"])
        XCTAssertEqual(try Capabilities(words: ["all"]), .all)
        XCTAssertEqual(try Capabilities(words: ["READ"]), .allowsReading)
    }

    func testUnknownCapabilityWordIsAnError() {
        XCTAssertThrowsError(try Capabilities(words: ["read", "fly"])) { error in
            let e = error as? ProviderError
            XCTAssertEqual(e?.code, .invalidArgument)
            XCTAssertTrue(e?.reason.contains("fly") ?? false)
        }
    }

    func testErrnoMapFollowsLinuxConventions() {
        let cases: [(ProviderError.Code, Int32)] = [
            (.noSuchItem, ENOENT), (.filenameCollision, EEXIST), (.insufficientQuota, EDQUOT),
            (.directoryNotEmpty, ENOTEMPTY), (.deletionRejected, EPERM), (.notPermitted, EPERM),
            (.accessDenied, EACCES), (.typeNotAllowed, EPERM), (.corruptFile, EIO),
            (.nameTooLong, ENAMETOOLONG), (.illegalByteSequence, EILSEQ), (.noSpace, ENOSPC),
            (.serverUnreachable, EIO), (.notAuthenticated, EACCES), (.versionOutOfDate, ESTALE),
        ]
        for (code, err) in cases {
            XCTAssertEqual(ProviderError(code).errno, err, "\(code)")
        }
    }

    func testPosixErrorsKeepTheirErrno() {
        let e = ProviderError.posix(ENOSPC, "write")
        XCTAssertEqual(e.code, .noSpace)
        XCTAssertEqual(e.errno, ENOSPC)
        XCTAssertTrue(e.reason.hasPrefix("write: "))
        XCTAssertEqual(ProviderError.posix(EMLINK, "link").errno, EMLINK)
    }

    func testItemDefaultsPermissionsByKind() {
        let now = Date()
        let folder = Item(
            identifier: ItemIdentifier("1"), parentIdentifier: .rootContainer, filename: "a",
            kind: .folder, contentType: .folder, creationDate: now, contentModificationDate: now, capabilities: .all)
        let file = Item(
            identifier: ItemIdentifier("2"), parentIdentifier: .rootContainer, filename: "b",
            kind: .file, contentType: .data, creationDate: now, contentModificationDate: now, capabilities: .all)
        XCTAssertEqual(folder.posixPermissions, 0o755)
        XCTAssertEqual(file.posixPermissions, 0o644)
        XCTAssertNotEqual(ItemIdentifier.rootContainer, ItemIdentifier.trashContainer)
    }
}
