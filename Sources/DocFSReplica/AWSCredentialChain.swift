#if canImport(Glibc)
    import Glibc
#endif
import Foundation
import DocFSRemote

/// S3 credentials in the AWS tools' order, read again whenever the server says the keys it was
/// given are no longer good (an expired session, a rotated key):
///
/// 1. `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` (/ `AWS_SESSION_TOKEN`) in the environment;
/// 2. `--s3-credentials FILE` given to `docfs init` (its `[PROFILE]` section, else the lines
///    outside any section);
/// 3. the shared credentials file (`AWS_SHARED_CREDENTIALS_FILE`, else `~/.aws/credentials`),
///    section `[PROFILE]`;
/// 4. the config file (`AWS_CONFIG_FILE`, else `~/.aws/config`), section `[profile PROFILE]`
///    (`[default]` for the default).
///
/// PROFILE is `AWS_PROFILE`, else `default`. Region: `AWS_REGION`, `AWS_DEFAULT_REGION`, the
/// profile's `region` in the config file, then in the credentials file. A file others may read is
/// refused (chmod 600), as with pgpass.
package struct AWSCredentialChain: Sendable {
    package var environment: [String: String]
    package var explicitFile: String?

    package init(environment: [String: String], explicitFile: String?) {
        self.environment = environment
        self.explicitFile = explicitFile
    }

    var profile: String { environment["AWS_PROFILE"].flatMap { $0.isEmpty ? nil : $0 } ?? "default" }
    var home: String? { environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } }
    var sharedFile: String? { environment["AWS_SHARED_CREDENTIALS_FILE"] ?? home.map { $0 + "/.aws/credentials" } }
    var configFile: String? { environment["AWS_CONFIG_FILE"] ?? home.map { $0 + "/.aws/config" } }

    package struct Resolved: Sendable {
        package var credentials: S3Credentials
        package var region: String?
        /// Where they came from, for messages (never the secret).
        package var source: String
    }

    /// The first credentials of the chain; nil when none has any.
    package func resolve() throws -> Resolved? {
        let region =
            environment["AWS_REGION"].flatMap { $0.isEmpty ? nil : $0 }
            ?? environment["AWS_DEFAULT_REGION"].flatMap { $0.isEmpty ? nil : $0 }
        if let credentials = S3Credentials.fromEnvironment(environment) {
            return Resolved(credentials: credentials, region: region ?? fileRegion(), source: "the environment")
        }
        if let explicitFile {
            let sections = try Self.read(explicitFile, required: true)
            let values = sections[profile] ?? sections[""] ?? [:]
            guard let credentials = Self.credentials(values) else {
                throw ReplicaConfiguration.Problem(
                    "the S3 credentials file \(explicitFile) has no aws_access_key_id and aws_secret_access_key\(sections.count > 1 ? " in profile \(profile)" : "")"
                )
            }
            return Resolved(credentials: credentials, region: region ?? values["region"] ?? fileRegion(), source: explicitFile)
        }
        if let sharedFile, let credentials = Self.credentials(try Self.read(sharedFile, required: false)[profile] ?? [:]) {
            return Resolved(credentials: credentials, region: region ?? fileRegion(), source: "\(sharedFile) [\(profile)]")
        }
        if let configFile, let credentials = Self.credentials(try configSection()) {
            return Resolved(credentials: credentials, region: region ?? fileRegion(), source: "\(configFile) [profile \(profile)]")
        }
        return nil
    }

    /// The profile's section of the config file (`[profile NAME]`, or `[default]`).
    func configSection() throws -> [String: String] {
        guard let configFile else { return [:] }
        let sections = try Self.read(configFile, required: false)
        return sections["profile " + profile] ?? (profile == "default" ? sections["default"] : nil) ?? [:]
    }

    func fileRegion() -> String? {
        if let region = (try? configSection())?["region"] { return region }
        guard let sharedFile else { return nil }
        return (try? Self.read(sharedFile, required: false))?[profile]?["region"]
    }

    static func credentials(_ values: [String: String]) -> S3Credentials? {
        guard let id = values["aws_access_key_id"], !id.isEmpty, let secret = values["aws_secret_access_key"], !secret.isEmpty else { return nil }
        return S3Credentials(accessKeyID: id, secretAccessKey: secret, sessionToken: values["aws_session_token"])
    }

    /// An INI file as sections (`""` for lines before any) of lowercased keys. A missing file is
    /// empty unless `required`; one others may read is refused.
    static func read(_ path: String, required: Bool) throws -> [String: [String: String]] {
        var st = stat()
        guard stat(path, &st) == 0 else {
            if !required && errno == ENOENT { return [:] }
            throw ReplicaConfiguration.Problem("cannot read the S3 credentials file \(path): \(String(cString: strerror(errno)))")
        }
        guard st.st_mode & 0o077 == 0 else {
            throw ReplicaConfiguration.Problem(
                "the S3 credentials file \(path) may be read by others (mode \(String(st.st_mode & 0o777, radix: 8))): chmod 600 it")
        }
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw ReplicaConfiguration.Problem("cannot read the S3 credentials file \(path)")
        }
        var sections: [String: [String: String]] = [:]
        var current = ""
        for raw in text.split(whereSeparator: \.isNewline) {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("["), line.hasSuffix("]") {
                current = line.dropFirst().dropLast().trimmingCharacters(in: .whitespaces)
                continue
            }
            let parts = line.split(separator: "=", maxSplits: 1)
            guard parts.count == 2 else { continue }
            sections[current, default: [:]][parts[0].trimmingCharacters(in: .whitespaces).lowercased()] =
                parts[1].trimmingCharacters(in: .whitespaces)
        }
        return sections
    }
}
