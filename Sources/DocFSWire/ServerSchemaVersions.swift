/// The server's schema versions a replica's store acts on, named once for both sides: the server
/// client installs and reads them (`RemoteSchema+Links`), the store refuses what an older server
/// cannot keep (`StoreReplica+RemoteNames`, `LocalStore+Moves`).
package enum ServerSchemaVersions {
    /// The first schema with names: a replica refuses `link(2)` against an older server.
    package static let names = 12
    /// The first schema that keeps a trashed name: a replica refuses `mv NAME .Trash/` of one
    /// name of several against an older server.
    package static let trashedNames = 13
}
