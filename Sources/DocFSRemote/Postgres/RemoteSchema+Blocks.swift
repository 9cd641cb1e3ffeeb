extension RemoteSchema {
    /// Version 8: contents as blocks addressed by their SHA-256.
    /// - `docfs_blocks`: every block the bucket holds: its hash (hex), the pack object it is in
    ///   (`PREFIX/packs/…`), where in the pack, and its length. A block is uploaded once per tree,
    ///   whichever replica or file has it first.
    /// - `docfs_manifests`: a content version made of blocks, by the key its versions name
    ///   (`PREFIX/manifests/<operation id>-<contents>`, in place of an object key), and its size.
    /// - `docfs_manifest_blocks`: a manifest's blocks in order. The foreign key to `docfs_blocks`
    ///   is what keeps gc and a replica that found a block already there from crossing: a block a
    ///   manifest names cannot go, and a manifest naming a block gc just removed is refused (the
    ///   replica uploads it again).
    /// - `docfs_versions.replica`: the replica that sent the version.
    /// Versions whose key names no manifest are whole objects (`PREFIX/objects/…`, before version 8).
    static let blockStatements: [String] = [
        """
        CREATE TABLE IF NOT EXISTS docfs_blocks (
            hash        text PRIMARY KEY,
            pack_key    text NOT NULL,
            pack_offset bigint NOT NULL,
            length      bigint NOT NULL,
            created_ns  bigint NOT NULL
        )
        """,
        "CREATE INDEX IF NOT EXISTS docfs_blocks_pack ON docfs_blocks (pack_key)",
        """
        CREATE TABLE IF NOT EXISTS docfs_manifests (
            key        text PRIMARY KEY,
            size       bigint NOT NULL,
            created_ns bigint NOT NULL
        )
        """,
        """
        CREATE TABLE IF NOT EXISTS docfs_manifest_blocks (
            key     text NOT NULL REFERENCES docfs_manifests (key) ON DELETE CASCADE,
            ordinal integer NOT NULL,
            hash    text NOT NULL REFERENCES docfs_blocks (hash),
            PRIMARY KEY (key, ordinal)
        )
        """,
        "CREATE INDEX IF NOT EXISTS docfs_manifest_blocks_hash ON docfs_manifest_blocks (hash)",
        // Which replica sent each version (`docfs versions`): "HOST:STORE".
        "ALTER TABLE docfs_versions ADD COLUMN IF NOT EXISTS replica text",
    ]
}
