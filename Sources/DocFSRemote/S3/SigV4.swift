import Crypto
import Foundation

/// S3 credentials. `description` never shows the secret.
package struct S3Credentials: Sendable, CustomStringConvertible {
    package var accessKeyID: String
    package var secretAccessKey: String
    /// A temporary session's token (`x-amz-security-token`), when there is one.
    package var sessionToken: String?

    package init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil) {
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
    }

    /// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and (optionally) `AWS_SESSION_TOKEN`.
    package static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> S3Credentials? {
        guard let id = environment["AWS_ACCESS_KEY_ID"], !id.isEmpty,
            let secret = environment["AWS_SECRET_ACCESS_KEY"], !secret.isEmpty
        else { return nil }
        return S3Credentials(accessKeyID: id, secretAccessKey: secret, sessionToken: environment["AWS_SESSION_TOKEN"])
    }

    package var description: String { "S3Credentials(accessKeyID: \(accessKeyID), secret: <hidden>)" }
}

/// AWS Signature Version 4 for S3 requests in the Authorization header, on swift-crypto.
///
/// Checked against the worked examples of AWS's documentation ("Signature Calculations for the
/// Authorization Header", GET with Range, PUT, GET ?lifecycle, GET ?max-keys=2&prefix=J) in
/// `SigV4Tests`, and against moto's signature-checking mode in the integration tests.
package struct SigV4Signer: Sendable {
    package static let unsignedPayload = "UNSIGNED-PAYLOAD"
    /// SHA-256 of the empty body.
    package static let emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    package var credentials: S3Credentials
    package var region: String
    package var service: String

    package init(credentials: S3Credentials, region: String = "us-east-1", service: String = "s3") {
        self.credentials = credentials
        self.region = region
        self.service = service
    }

    /// What signing produced: the headers to send (the given ones plus `x-amz-date`,
    /// `x-amz-content-sha256`, a session token if any, and `Authorization`), and the
    /// intermediate texts for tests and debugging (they hold no secret).
    package struct Signed: Sendable {
        package var headers: [(name: String, value: String)]
        package var canonicalRequest: String
        package var stringToSign: String
        package var signature: String
        package var authorization: String
    }

    /// Signs a request.
    /// - Parameters:
    ///   - canonicalURI: the path exactly as sent, already encoded (`S3Path.encode`).
    ///   - query: decoded name/value pairs; encoded and sorted here (empty values as `name=`).
    ///   - headers: every header to sign, `host` (exactly as sent, with its port) included.
    ///   - payloadHash: hex SHA-256 of the body, or `UNSIGNED-PAYLOAD` for a streamed body.
    ///   - amzDate: `YYYYMMDD'T'HHMMSS'Z'` (`SigV4Signer.amzDate(for:)`).
    package func sign(
        method: String, canonicalURI: String, query: [(String, String)],
        headers: [(name: String, value: String)], payloadHash: String, amzDate: String
    ) -> Signed {
        var all = headers
        func has(_ name: String) -> Bool { all.contains { $0.name.lowercased() == name } }
        if !has("x-amz-date") { all.append(("x-amz-date", amzDate)) }
        if !has("x-amz-content-sha256") { all.append(("x-amz-content-sha256", payloadHash)) }
        if let token = credentials.sessionToken, !has("x-amz-security-token") { all.append(("x-amz-security-token", token)) }

        var canonical: [String: String] = [:]
        for (name, value) in all {
            let key = name.lowercased()
            let trimmed = Self.trimHeaderValue(value)
            canonical[key] = canonical[key].map { $0 + "," + trimmed } ?? trimmed
        }
        let names = canonical.keys.sorted()
        let canonicalHeaders = names.map { "\($0):\(canonical[$0]!)\n" }.joined()
        let signedHeaders = names.joined(separator: ";")
        let canonicalQuery = Self.canonicalQuery(query)
        let canonicalRequest = [method, canonicalURI, canonicalQuery, canonicalHeaders, signedHeaders, payloadHash]
            .joined(separator: "\n")

        let day = String(amzDate.prefix(8))
        let scope = "\(day)/\(region)/\(service)/aws4_request"
        let stringToSign = ["AWS4-HMAC-SHA256", amzDate, scope, Self.sha256Hex(Array(canonicalRequest.utf8))]
            .joined(separator: "\n")

        var key = SymmetricKey(data: Array(("AWS4" + credentials.secretAccessKey).utf8))
        for part in [day, region, service, "aws4_request"] {
            key = SymmetricKey(data: Data(HMAC<SHA256>.authenticationCode(for: Array(part.utf8), using: key)))
        }
        let signature = Self.hex(HMAC<SHA256>.authenticationCode(for: Array(stringToSign.utf8), using: key))
        let authorization =
            "AWS4-HMAC-SHA256 Credential=\(credentials.accessKeyID)/\(scope), "
            + "SignedHeaders=\(signedHeaders), Signature=\(signature)"
        all.append(("Authorization", authorization))
        return Signed(
            headers: all, canonicalRequest: canonicalRequest, stringToSign: stringToSign,
            signature: signature, authorization: authorization)
    }

    /// `20130524T000000Z` for a date (UTC).
    package static func amzDate(for date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return "\(parts.tm_year + 1900)\(two(parts.tm_mon + 1))\(two(parts.tm_mday))T"
            + "\(two(parts.tm_hour))\(two(parts.tm_min))\(two(parts.tm_sec))Z"
    }

    package static func canonicalQuery(_ query: [(String, String)]) -> String {
        let encoded: [(name: String, value: String)] = query.map { pair in
            (S3Path.encodeComponent(pair.0), S3Path.encodeComponent(pair.1))
        }
        let sorted = encoded.sorted { a, b in a.name == b.name ? a.value < b.value : a.name < b.name }
        return sorted.map { pair in pair.name + "=" + pair.value }.joined(separator: "&")
    }

    static func trimHeaderValue(_ value: String) -> String {
        // Trim, and fold runs of spaces into one (outside quotes is what AWS asks; S3 values here have none).
        var out = ""
        var lastSpace = false
        for ch in value.trimmingCharacters(in: .whitespaces) {
            if ch == " " { if !lastSpace { out.append(ch) }; lastSpace = true } else { out.append(ch); lastSpace = false }
        }
        return out
    }

    package static func sha256Hex(_ bytes: [UInt8]) -> String { hex(SHA256.hash(data: bytes)) }

    static func hex<D: Sequence>(_ digest: D) -> String where D.Element == UInt8 {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        for b in digest { out.append(digits[Int(b >> 4)]); out.append(digits[Int(b & 0xf)]) }
        return String(decoding: out, as: UTF8.self)
    }
}

/// Path-style S3 paths and the URI encoding Signature V4 asks for.
package enum S3Path {
    /// RFC 3986 unreserved characters stay; every other byte of the UTF-8 is `%XX` (upper case).
    package static func encodeComponent(_ s: String, keepSlash: Bool = false) -> String {
        var out = [UInt8]()
        let hexDigits = Array("0123456789ABCDEF".utf8)
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"),
                UInt8(ascii: "."), UInt8(ascii: "~"):
                out.append(b)
            case UInt8(ascii: "/") where keepSlash:
                out.append(b)
            default:
                out.append(UInt8(ascii: "%")); out.append(hexDigits[Int(b >> 4)]); out.append(hexDigits[Int(b & 0xf)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `/bucket/key` with the key encoded per segment (its `/` kept): the URI sent and signed.
    package static func objectPath(bucket: String, key: String?) -> String {
        guard let key else { return "/" + encodeComponent(bucket) }
        return "/" + encodeComponent(bucket) + "/" + encodeComponent(key, keepSlash: true)
    }
}
