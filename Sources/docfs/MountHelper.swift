import Foundation
import Glibc

/// docfs as a mount(8) helper, so `mount -t fuse.docfs STORE MNT -o OPTS` and fstab lines work.
///
/// Two ways in, both translated into `docfs mount STORE MNT [-o OPTS] [--trash] …`:
///
/// - `mount.fuse.docfs STORE MNT [-sfnv] [-o OPTS] [-t TYPE]` — what mount(8) runs when
///   `/sbin/mount.fuse.docfs` exists (`make install` puts it there as a link to docfs; docfs
///   knows it by its name, argv[0]).
/// - `docfs STORE MNT -o OPTS` — what mount.fuse3 runs (through `/bin/sh` and PATH) for the type
///   `fuse.docfs` when no `mount.fuse.docfs` exists. Recognised only when the first word is not a
///   subcommand and an `-o` follows, which mount.fuse3 always passes (it adds `dev,suid`, which
///   are dropped: a docfs mount is nosuid unless `-o suid` is given to `docfs mount` or to
///   `mount.fuse.docfs`).
///
/// mount(8)'s `-f` is a fake mount (do nothing), not docfs's foreground flag.
enum MountHelper {
    static let helperName = "mount.fuse.docfs"

    /// What to do with docfs's command line.
    enum Invocation: Equatable {
        /// A normal command line: let ArgumentParser have it.
        case command
        /// A mount helper call: these are the `docfs` arguments to run instead.
        case mount([String])
        /// `-f` (fake): mount(8) asks to do everything but the mount.
        case fake
    }

    /// Options that mean something to mount(8), fstab or systemd only. libfuse does not know
    /// them and would refuse the mount, so they are accepted and dropped.
    static let mountOnlyWords: Set<String> = [
        "defaults", "auto", "noauto", "user", "users", "nouser", "owner", "group", "nofail",
        "_netdev", "netdev", "comment", "uhelper", "helper", "atime", "diratime", "loud", "silent",
        "sw", "nobootwait", "bg", "fg",
    ]

    /// True for `nofail`, `x-systemd.automount`, `x-mount.mkdir=0755`, `comment=…` and the like.
    static func isMountOnlyOption(_ opt: String) -> Bool {
        let key = opt.split(separator: "=", maxSplits: 1).first.map(String.init) ?? opt
        return mountOnlyWords.contains(key) || key.hasPrefix("x-")
    }

    /// Looks at argv (program name included) and says how to run.
    static func invocation(_ argv: [String], subcommands: [String]) throws -> Invocation {
        guard let program = argv.first else { return .command }
        let args = Array(argv.dropFirst())
        let name = (program as NSString).lastPathComponent
        if name != helperName {
            // mount.fuse3's form: `docfs STORE MNT -o OPTS`.
            guard args.count >= 4, let first = args.first, !first.hasPrefix("-"),
                !subcommands.contains(first), first != "help", args.dropFirst(2).contains(where: { $0 == "-o" || $0.hasPrefix("-o") })
            else { return .command }
        }
        // mount.fuse3 adds `dev,suid` to every mount it runs (mount(8)'s defaults), asked for or
        // not: from it they do not count, and the mount stays nosuid and nodev.
        return try translate(args, implicitDevSUID: name != helperName)
    }

    /// What mount.fuse3 passes on its own to every mount.
    static let mountFuse3Defaults: Set<String> = ["dev", "suid"]

    /// mount(8)'s helper arguments → `docfs mount …` arguments.
    static func translate(_ args: [String], implicitDevSUID: Bool = false) throws -> Invocation {
        var positionals: [String] = []
        var options: [String] = []
        var fake = false
        var i = 0
        func usage(_ why: String) -> UserFacingError {
            UserFacingError("docfs: \(why)\nusage: \(helperName) STORE MOUNTPOINT [-sfnv] [-o OPTION,...]  (as mount(8) runs it)")
        }
        while i < args.count {
            let a = args[i]
            if a == "-o" || a == "-t" || a == "-N" {
                guard i + 1 < args.count else { throw usage("\(a) needs a value") }
                let value = args[i + 1]
                switch a {
                case "-o": options.append(value)
                case "-t":
                    guard ["fuse.docfs", "docfs", "fuse"].contains(value) else {
                        throw usage("-t \(value): this helper mounts fuse.docfs only")
                    }
                default: throw UserFacingError("docfs: -N (mounting in another namespace) is not supported")
                }
                i += 2
                continue
            }
            if a.hasPrefix("-o"), a.count > 2 {
                options.append(String(a.dropFirst(2)))
            } else if a.hasPrefix("-"), a.count > 1 {
                // mount(8) passes -s (sloppy), -f (fake), -n (no mtab), -v (verbose).
                for flag in a.dropFirst() {
                    switch flag {
                    case "f": fake = true
                    case "s", "n", "v": break
                    default: throw usage("unknown option -\(flag)")
                    }
                }
            } else {
                positionals.append(a)
            }
            i += 1
        }
        guard positionals.count == 2 else { throw usage("expected STORE and MOUNTPOINT") }
        if fake { return .fake }

        var store = positionals[0]
        // The source as /proc/mounts shows it (docfs:/srv/store) is accepted too.
        if store.hasPrefix("docfs:"), access(String(store.dropFirst(6)), F_OK) == 0 { store = String(store.dropFirst(6)) }
        let mountpoint = positionals[1]

        var docfsArgs = ["mount", store, mountpoint]
        var passed: [String] = []
        for opt in options.flatMap({ $0.split(separator: ",").map(String.init) }) where !opt.isEmpty {
            let kv = opt.split(separator: "=", maxSplits: 1).map(String.init)
            switch kv[0] {
            case "trash": docfsArgs.append("--trash")
            case "log_level", "log-level":
                guard kv.count == 2 else { throw usage("-o \(opt): expected log_level=LEVEL") }
                docfsArgs += ["--log-level", kv[1]]
            case "log_file", "log-file":
                guard kv.count == 2 else { throw usage("-o \(opt): expected log_file=PATH") }
                docfsArgs += ["--log-file", kv[1]]
            default:
                if implicitDevSUID, mountFuse3Defaults.contains(opt) { continue }
                if !isMountOnlyOption(opt) { passed.append(opt) }
            }
        }
        if !passed.isEmpty { docfsArgs += ["-o", passed.joined(separator: ",")] }
        return .mount(docfsArgs)
    }

    /// `mount -a` mounts every fstab line that is not mounted yet; it asks again for a docfs line
    /// it cannot match (the kernel shows the source as docfs:STORE). The same store already on the
    /// same mountpoint is therefore a success, not an error. `memory:` is a source, not a path:
    /// it is compared as it is (the kernel shows docfs:memory:).
    static func alreadyMounted(_ docfsArgs: [String]) -> Bool {
        guard docfsArgs.count >= 3 else { return false }
        let source = docfsArgs[1]
        let store = source == Mount.memoryStore ? source : MountTable.canonical(source)
        let mnt = MountTable.canonical(docfsArgs[2])
        guard let entry = MountTable.entry(at: mnt), entry.type == "fuse.docfs" else { return false }
        return entry.source == "docfs:" + store
    }
}
