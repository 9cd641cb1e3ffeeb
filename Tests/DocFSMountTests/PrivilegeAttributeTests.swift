import Foundation
import XCTest

/// What the kernel leaves to docfs once it handles privileges itself (FUSE_HANDLE_KILLPRIV_V2):
/// new contents clear set-user-ID and set-group-ID as a write on ext4 does — for a writer
/// without CAP_FSETID (OwnershipMountTests); root keeps them, as on ext4. And the xattr
/// namespaces docfs does not support answer EOPNOTSUPP, as on a filesystem without them.
final class PrivilegeAttributeTests: MountTestCase {
    func testRootWritersKeepSetIDBits() {
        let r = fx.sh(
            """
            set -e
            cd mnt
            printf a > u && chmod 4755 u && printf b >> u && stat -c %a u
            printf a > g && chmod 2775 g && printf b >> g && stat -c %a g
            printf a > k && chmod 2765 k && printf b >> k && stat -c %a k
            printf a > t && chmod 6755 t && truncate -s 0 t && stat -c %a t
            printf a > r && chmod 4755 r && cat r >/dev/null && touch -m r && stat -c %a r
            printf a > o && chmod 4755 o && : > o && stat -c %a o
            cat u g k
            """)
        XCTAssertEqual(r.status, 0, "\(r)\nlog:\n\(fx.log)")
        // Root holds CAP_FSETID: writing, truncating and O_TRUNC leave the bits, as on ext4.
        XCTAssertEqual(r.stdout, "4755\n2775\n2765\n6755\n4755\n4755\nababab", "\(r)")
    }

    /// A root writer's large first write keeps them too, and lands whole.
    func testRootLargeWritesKeepSetIDBits() {
        let r = fx.sh(
            """
            set -e
            head -c 3145728 /dev/urandom > large.bin
            printf a > mnt/u && chmod 4755 mnt/u
            dd if=large.bin of=mnt/u bs=1M conv=notrunc status=none
            stat -c %a mnt/u && cmp large.bin mnt/u && echo same
            """)
        XCTAssertEqual(r.stdout, "4755\nsame\n", "\(r)\nlog:\n\(fx.log)")
    }

    func testUnsupportedNamespacesAnswerEOPNOTSUPP() throws {
        XCTAssertEqual(fx.sh("echo hi > mnt/f.txt && mkdir mnt/d && setfattr -n user.k -v v mnt/f.txt").status, 0)
        let script = """
            import errno, os, sys
            for p in sys.argv[1:]:
                for name in ["security.selinux", "security.capability", "system.posix_acl_access",
                             "system.posix_acl_default", "trusted.x"]:
                    try: os.getxattr(p, name); print("OK")
                    except OSError as e: print(errno.errorcode[e.errno])
            print(os.getxattr(sys.argv[1], "user.k").decode())
            """
        try script.write(toFile: fx.dir + "/x.py", atomically: true, encoding: .utf8)
        var r = fx.sh("python3 x.py mnt/f.txt mnt/d")
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssertEqual(r.stdout.split(separator: "\n"), Array(repeating: "ENOTSUP", count: 10) + ["v"], "\(r)")
        // ls -l shows no ACL mark ('+') and no error.
        r = fx.sh("ls -ld mnt/f.txt mnt/d | cut -c1-11")
        XCTAssertEqual(r.status, 0, "\(r)")
        XCTAssertEqual(r.stdout, "drwxr-xr-x \n-rw-r--r-- \n", "\(r)")
    }
}
