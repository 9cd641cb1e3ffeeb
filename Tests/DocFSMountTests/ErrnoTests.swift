import Foundation
import XCTest
#if canImport(Glibc)
    import Glibc
#endif

/// The errno a Linux filesystem gives, for the ordinary failures.
final class ErrnoTests: MountTestCase {

    func testRmdirOfNonEmptyDirectoryGivesENOTEMPTY() {
        XCTAssertErrno(fx.mkdirErrno(fx.m("d")), 0)
        XCTAssertErrno(fx.writeFile(fx.m("d/f"), [1, 2, 3]), 0)
        XCTAssertErrno(fx.rmdirErrno(fx.m("d")), ENOTEMPTY)
        XCTAssertEqual(fx.list(fx.m("d")), ["f"])
    }

    func testUnlinkOfMissingFileGivesENOENT() {
        XCTAssertErrno(fx.unlinkErrno(fx.m("no-such-file")), ENOENT)
        XCTAssertErrno(fx.openErrno(fx.m("no-such-file"), O_RDONLY), ENOENT)
    }

    func testMkdirOverExistingNameGivesEEXIST() {
        XCTAssertErrno(fx.writeFile(fx.m("taken"), [1]), 0)
        XCTAssertErrno(fx.mkdirErrno(fx.m("taken")), EEXIST)
        XCTAssertErrno(fx.openErrno(fx.m("taken"), O_WRONLY | O_CREAT | O_EXCL), EEXIST)
    }

    func testRenameNoReplaceOntoExistingNameGivesEEXIST() {
        XCTAssertErrno(fx.writeFile(fx.m("a"), Array("A".utf8)), 0)
        XCTAssertErrno(fx.writeFile(fx.m("b"), Array("B".utf8)), 0)
        XCTAssertErrno(fx.renameat2Errno(fx.m("a"), fx.m("b"), flags: RENAME_NOREPLACE_FLAG), EEXIST)
        XCTAssertBytes(fx.readFile(fx.m("a")), Array("A".utf8))
        XCTAssertBytes(fx.readFile(fx.m("b")), Array("B".utf8))
        XCTAssertErrno(fx.renameat2Errno(fx.m("a"), fx.m("c"), flags: RENAME_NOREPLACE_FLAG), 0)
        XCTAssertEqual(fx.list(fx.mnt), ["b", "c"])
    }

    func testRenameExchangeGivesEINVAL() {
        XCTAssertErrno(fx.writeFile(fx.m("a"), Array("A".utf8)), 0)
        XCTAssertErrno(fx.writeFile(fx.m("b"), Array("B".utf8)), 0)
        XCTAssertErrno(fx.renameat2Errno(fx.m("a"), fx.m("b"), flags: RENAME_EXCHANGE_FLAG), EINVAL)
        XCTAssertBytes(fx.readFile(fx.m("a")), Array("A".utf8))
    }

    func testNameOf256BytesGivesENAMETOOLONG() {
        let long = String(repeating: "n", count: 256)
        XCTAssertErrno(fx.openErrno(fx.m(long), O_WRONLY | O_CREAT), ENAMETOOLONG)
        XCTAssertErrno(fx.mkdirErrno(fx.m(long)), ENAMETOOLONG)
        XCTAssertEqual(fx.list(fx.mnt), [])
        let ok = String(repeating: "n", count: 255)
        XCTAssertErrno(fx.openErrno(fx.m(ok), O_WRONLY | O_CREAT), 0, "255 bytes is allowed")
        XCTAssertEqual(fx.list(fx.mnt), [ok])
    }

    func testNonUTF8NameGivesEILSEQ() {
        // "bad\xff.txt": not UTF-8. docfs names are UTF-8 strings; other names are refused.
        let path: [CChar] =
            Array(fx.m("").utf8).map { CChar(bitPattern: $0) }
            + [0x2F, 0x62, 0x61, 0x64, CChar(bitPattern: 0xFF), 0x2E, 0x74, 0x78, 0x74, 0]
        XCTAssertErrno(
            fx.errnoOf("open non-UTF-8") {
                let fd = open(path, O_WRONLY | O_CREAT, 0o644)
                return fd < 0 ? -1 : close(fd)
            }, EILSEQ)
        XCTAssertErrno(fx.errnoOf("mkdir non-UTF-8") { mkdir(path, 0o755) }, EILSEQ)
        XCTAssertEqual(fx.list(fx.mnt), [])
    }
}
