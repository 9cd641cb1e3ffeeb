import Foundation
import PackagePlugin

/// Writes `BuildCommit.swift` (`let buildCommit = "abc123def456"`, `-dirty` with uncommitted
/// changes to tracked files, `unknown` outside a git checkout) before each build of the target,
/// for `docfs --version`. The file is rewritten only when the commit changed, so an unchanged
/// tree recompiles nothing.
@main
struct BuildCommit: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let directory = context.pluginWorkDirectoryURL.appending(path: "generated")
        let script = """
            mkdir -p "$2"
            commit=$(git -C "$1" rev-parse --short=12 HEAD 2>/dev/null) || commit=unknown
            if [ "$commit" != unknown ] && [ -n "$(git -C "$1" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
                commit="$commit-dirty"
            fi
            line="let buildCommit = \\"$commit\\""
            [ "$(cat "$2/BuildCommit.swift" 2>/dev/null)" = "$line" ] || printf '%s\\n' "$line" > "$2/BuildCommit.swift"
            """
        return [
            .prebuildCommand(
                displayName: "docfs: the commit for --version",
                executable: URL(fileURLWithPath: "/bin/sh"),
                arguments: ["-c", script, "sh", context.package.directoryURL.path, directory.path],
                outputFilesDirectory: directory)
        ]
    }
}
