// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "docfs",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "docfs", targets: ["docfs"]),
        .library(name: "DocFSProvider", targets: ["DocFSProvider"]),
        // Mount any Provider (what `docfs mount` uses), and mount one for the length of a test.
        .library(name: "DocFS", targets: ["DocFS"]),
        .library(name: "DocFSTesting", targets: ["DocFSTesting"]),
        .library(name: "DocFSMemory", targets: ["DocFSMemory"]),
        // Mount a store, and a replica of a server with its sync (what `docfs mount STORE` runs).
        .library(name: "DocFSStoreMount", targets: ["DocFSStoreMount"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        // The remote replica (DocFSRemote): PostgreSQL, HTTP for S3, SHA-256/HMAC for Signature V4.
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-crypto", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        // TLS to PostgreSQL (libpq's sslmode words, in DocFSRemote).
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        // `-o metrics`: the Prometheus registry and text format behind swift-metrics's API.
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
    ],
    targets: [
        // libfuse3 as a system library; the module map lives here, never at the package root.
        .systemLibrary(name: "CFuse", pkgConfig: "fuse3", providers: [.apt(["libfuse3-dev"])]),
        // The provider vocabulary: items, capabilities, content types, errors, the Provider protocol.
        .target(name: "DocFSProvider"),
        // What a replica's store and the server client exchange (the server's item, an attribute
        // change, a new item's attributes): both see this module and neither sees the other.
        .target(name: "DocFSWire", dependencies: ["DocFSProvider"]),
        // Content-type detection: the freedesktop shared-mime-info database (globs, magic) mapped
        // to UTType-style identifiers. Pure Swift, no FUSE.
        .target(name: "DocFSContentTypes", dependencies: ["DocFSProvider"]),
        // The embedded default provider: SQLite metadata (GRDB) + content files, layout (Yams).
        .target(
            name: "DocFSStore",
            dependencies: [
                "DocFSProvider", "DocFSWire", "DocFSContentTypes",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        // A second provider: the whole tree in memory, contents in memfds (`docfs mount memory: MNT`).
        .target(name: "DocFSMemory", dependencies: ["DocFSProvider"]),
        // The server side of a remote replica: an S3 client with our own Signature V4, and the
        // PostgreSQL schema and operations (items, versions, change log, upload intents).
        .target(
            name: "DocFSRemote",
            dependencies: [
                "DocFSProvider", "DocFSWire",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]),
        // A replica's sync: the engine that sends the store's outbox and applies other replicas'
        // changes, conflicts, items set aside, downloads of contents on demand, S3 credentials,
        // `docfs init --remote`, `docfs remote setup` and `docfs remote gc`.
        .target(
            name: "DocFSReplica",
            dependencies: [
                "DocFSStore", "DocFSRemote", "DocFSProvider", "DocFSWire",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]),
        // FUSE low-level operations mapped onto a Provider.
        .target(
            name: "DocFSBridge",
            dependencies: [
                "CFuse", "DocFSProvider",
                .product(name: "Logging", package: "swift-log"),
            ]),
        // The public mounting API over the bridge.
        .target(
            name: "DocFS",
            dependencies: [
                "CFuse", "DocFSBridge", "DocFSProvider",
                .product(name: "Logging", package: "swift-log"),
            ]),
        // A store mounted, with its sync engine when it is a replica (`StoreMount`).
        .target(
            name: "DocFSStoreMount",
            dependencies: [
                "DocFS", "DocFSStore", "DocFSReplica",
                .product(name: "Logging", package: "swift-log"),
            ]),
        // `-o metrics`: a mount's figures in a Prometheus registry, served over HTTP by SwiftNIO.
        .target(
            name: "DocFSMetrics",
            dependencies: [
                "DocFSBridge", "DocFSReplica",
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]),
        // `docfs --version`: the commit the binary is built from, written before each build.
        .plugin(name: "BuildCommit", capability: .buildTool()),
        .target(
            name: "DocFSTesting",
            dependencies: [
                "DocFS",
                .product(name: "Logging", package: "swift-log"),
            ]),
        .executableTarget(
            name: "docfs",
            dependencies: [
                "DocFS", "DocFSProvider", "DocFSStore", "DocFSMemory", "DocFSReplica", "DocFSRemote", "DocFSStoreMount",
                "DocFSMetrics",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ], plugins: ["BuildCommit"]),
        // An example provider of another kind (a tar archive, read-only), mounted by the tests.
        .executableTarget(name: "docfs-archive", dependencies: ["DocFS"], path: "Examples/ArchiveProvider"),
        // `make microbench`: hot-path timings without a mount (never part of the tests).
        .executableTarget(
            name: "docfs-microbench",
            dependencies: [
                "DocFSBridge", "DocFSProvider", "DocFSStore",
                .product(name: "Logging", package: "swift-log"),
            ]),
        // `make bench-scale`: builds a big store through the store's own API; `make bench-replicas`'
        // load harness (`docfs-scale replicas`): many replicas' stores and sync engines in one process.
        .executableTarget(
            name: "docfs-scale",
            dependencies: [
                "DocFSStore", "DocFSReplica", "DocFSRemote", "DocFSProvider", "DocFSWire",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        .testTarget(name: "DocFSProviderTests", dependencies: ["DocFSProvider"]),
        .testTarget(name: "DocFSContentTypesTests", dependencies: ["DocFSContentTypes", "DocFSProvider"]),
        .testTarget(name: "DocFSStoreTests", dependencies: ["DocFSStore", "DocFSProvider", "DocFSWire"]),
        .testTarget(name: "DocFSMemoryTests", dependencies: ["DocFSMemory", "DocFSProvider"]),
        // Signer unit tests (AWS's published examples) and integration tests against the PostgreSQL
        // and moto servers `make test` starts (skipped without DOCFS_TEST_PG_URL / DOCFS_TEST_S3_ENDPOINT).
        .testTarget(
            name: "DocFSRemoteTests",
            dependencies: [
                "DocFSRemote", "DocFSProvider", "DocFSWire",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        // The sync engine against an in-memory server and object store (no PostgreSQL, no S3).
        .testTarget(
            name: "DocFSReplicaTests",
            dependencies: [
                "DocFSReplica", "DocFSStore", "DocFSRemote", "DocFSProvider", "DocFSWire", "DocFSTesting",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]),
        .testTarget(name: "DocFSBridgeTests", dependencies: ["DocFSBridge", "DocFSProvider"]),
        .testTarget(
            name: "DocFSMetricsTests",
            dependencies: [
                "DocFSMetrics", "DocFSBridge",
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]),
        // Mounts in-process through DocFSTesting (needs /dev/fuse and root, as the mounted tests).
        .testTarget(
            name: "DocFSTestingTests",
            dependencies: [
                "DocFSTesting", "DocFS", "DocFSMemory", "DocFSStore", "docfs-archive",
                .product(name: "Logging", package: "swift-log"),
            ]),
        // Mounted tests: drive the built `docfs` executable as a subprocess.
        .testTarget(name: "DocFSMountTests", dependencies: ["docfs", "docfs-archive", "docfs-scale"]),
    ],
    swiftLanguageModes: [.v6]
)
