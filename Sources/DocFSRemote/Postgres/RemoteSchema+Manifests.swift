/// Version 10 of the server's schema: a version names contents that exist.
///
/// A replica records a file's manifest, then commits the version that names it. A replica
/// stalled in between for longer than its upload intents live (a suspended laptop, a cut link)
/// could find gc had dropped the manifest, and its commit would name nothing: every reader would
/// get EIO. The server refuses that commit instead (`docfs_version_names_contents`, SQLSTATE
/// DF001, which the replica takes as "try again": it uploads the blocks and the manifest anew),
/// and holds the manifest's row until the commit ends, so that a gc running meanwhile waits for
/// it. A manifest whose size is not the version's is refused for good (DF002).
extension RemoteSchema {
    static let manifestStatements: [String] = [
        """
        CREATE OR REPLACE FUNCTION docfs_version_names_contents() RETURNS trigger LANGUAGE plpgsql
        SECURITY DEFINER SET search_path = pg_catalog, public, pg_temp AS $fn$
        DECLARE
            recorded bigint;
        BEGIN
            IF NEW.content_key IS NULL OR position('/manifests/' IN '/' || NEW.content_key) = 0 THEN
                RETURN NEW;  -- a whole object (before blocks), or no contents
            END IF;
            SELECT m.size INTO recorded FROM docfs_manifests m WHERE m.key = NEW.content_key FOR KEY SHARE;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'the manifest % is not on the server (removed by docfs remote gc while this replica waited); sent again', NEW.content_key
                    USING ERRCODE = 'DF001';
            END IF;
            IF recorded <> NEW.size THEN
                RAISE EXCEPTION 'the manifest % holds % bytes, not the version''s %', NEW.content_key, recorded, NEW.size
                    USING ERRCODE = 'DF002';
            END IF;
            RETURN NEW;
        END
        $fn$
        """,
        "DROP TRIGGER IF EXISTS docfs_version_names_contents ON docfs_versions",
        """
        CREATE TRIGGER docfs_version_names_contents BEFORE INSERT ON docfs_versions
        FOR EACH ROW EXECUTE FUNCTION docfs_version_names_contents()
        """,
    ]
}
