import CFuse
import Glibc

/// Who asked: the requesting process's filesystem uid and gid (`fuse_req_ctx`), and, only when a
/// rule needs them, its supplementary groups (libfuse reads them from /proc, so they are
/// fetched lazily). Sendable because an action running on the executor may still ask for the
/// groups: the request stays valid until it is answered, which comes after.
struct Caller: @unchecked Sendable {
    let uid: UInt32
    let gid: UInt32
    /// Supplementary groups when known (tests give them; requests fetch them on demand).
    private let knownGroups: [UInt32]?
    private let req: fuse_req_t?

    init(uid: UInt32, gid: UInt32, groups: [UInt32] = []) {
        self.uid = uid
        self.gid = gid
        self.knownGroups = groups
        self.req = nil
    }

    init(_ req: fuse_req_t) {
        let ctx = fuse_req_ctx(req)!.pointee
        uid = ctx.uid
        gid = ctx.gid
        knownGroups = nil
        self.req = req
    }

    /// Root bypasses mode bits as on ext4 (CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_CHOWN, CAP_FSETID):
    /// libfuse passes no capabilities, so uid 0 stands for them.
    @inline(__always) var isRoot: Bool { uid == 0 }

    /// In `group` as primary or supplementary group.
    func isMember(of group: UInt32) -> Bool {
        if group == gid { return true }
        return supplementaryGroups().contains(group)
    }

    func supplementaryGroups() -> [UInt32] {
        if let knownGroups { return knownGroups }
        guard let req else { return [] }
        var list = [gid_t](repeating: 0, count: 64)
        var n = fuse_req_getgroups(req, Int32(list.count), &list)
        if n > list.count {
            list = [gid_t](repeating: 0, count: Int(n))
            n = fuse_req_getgroups(req, Int32(list.count), &list)
        }
        return n > 0 ? Array(list.prefix(Int(n))) : []
    }
}
