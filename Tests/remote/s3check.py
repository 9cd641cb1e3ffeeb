"""A second client for the mounted remote tests (RemoteMountTests): what is in the bucket, read
with boto3 rather than docfs's own S3 client, and the local tree read with plain os calls.

    s3check.py create-bucket BUCKET
    s3check.py delete-bucket BUCKET        empties it (objects, their versions, multipart uploads) and deletes it
    s3check.py list BUCKET                 JSON [{key, size, etag}] of every object
    s3check.py uploads BUCKET              JSON [{key, uploadId}] of multipart uploads in progress
    s3check.py digest BUCKET KEYS.json     JSON {key: {size, sha256}} (streamed, never whole in memory)
    s3check.py read BUCKET KEYS.json       JSON {key: text} of small objects (UTF-8, errors replaced)
    s3check.py put BUCKET KEY TEXT         writes an object (a left-over for `docfs remote gc` to find);
                                           JSON {put, versionId} (null where the bucket keeps no versions)
    s3check.py zero BUCKET KEY             overwrites an object with as many zero bytes (a damaged pack; in a
                                           bucket that keeps versions, every version of it goes first)
    s3check.py versions BUCKET KEY         JSON [{versionId, size, latest, marker}] of the key's versions
    s3check.py delete-version BUCKET KEY V deletes version V of KEY
    s3check.py suspend-versioning BUCKET   PutBucketVersioning Suspended
    s3check.py tree ROOT                   JSON [{path, kind, size, sha256, target}] of a local tree,
                                           paths as "/a/b" from ROOT, sorted

S3 from the environment: DOCFS_TEST_S3_ENDPOINT, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY.
Exit 0 and JSON on stdout, or exit 1 and the error on stderr.

    s3check.py serve SOCKET                the same commands for clients of a Unix socket (started by
                                           Tests/remote/servers.sh): a request is one JSON line
                                           {"argv": [COMMAND, ...], "env": {...}}, the answer one JSON
                                           line {"status", "stdout", "stderr"}, as the command would give
"""
import hashlib
import json
import os
import stat
import sys

CHUNK = 1 << 20


def client():
    import boto3
    from botocore.config import Config
    return boto3.client(
        "s3", endpoint_url=os.environ["DOCFS_TEST_S3_ENDPOINT"], region_name="us-east-1",
        aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 3}))


def iam_client():
    import boto3
    return boto3.client("iam", endpoint_url=os.environ["DOCFS_TEST_S3_ENDPOINT"], region_name="us-east-1",
                        aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
                        aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"])


def objects(s3, bucket):
    out = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for o in page.get("Contents", []):
            out.append({"key": o["Key"], "size": o["Size"], "etag": o["ETag"].strip('"')})
    return out


def versions(s3, bucket, prefix=""):
    # Listed from the first segment: moto checks the signature of a "/" in a query value wrongly.
    out = []
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=prefix.split("/")[0]):
        for v in page.get("Versions", []):
            out.append({"key": v["Key"], "versionId": v["VersionId"], "size": v["Size"], "latest": v["IsLatest"], "marker": False})
        for v in page.get("DeleteMarkers", []):
            out.append({"key": v["Key"], "versionId": v["VersionId"], "size": 0, "latest": v["IsLatest"], "marker": True})
    return [v for v in out if v["key"].startswith(prefix)]


def uploads(s3, bucket):
    answer = s3.list_multipart_uploads(Bucket=bucket)
    return [{"key": u["Key"], "uploadId": u["UploadId"]} for u in answer.get("Uploads", [])]


def digest(s3, bucket, keys):
    """Size and SHA-256 of each key's contents: an object's bytes or, for a version made of
    blocks ({key: [[pack, offset, length], ...]}), its blocks cut from their packs in order."""
    out = {}
    if isinstance(keys, dict):
        packs = {}
        for key, blocks in keys.items():
            h, size = hashlib.sha256(), 0
            for pack, offset, length in blocks:
                if pack not in packs:
                    packs[pack] = s3.get_object(Bucket=bucket, Key=pack)["Body"].read()
                piece = packs[pack][offset:offset + length]
                h.update(piece)
                size += len(piece)
            out[key] = {"size": size, "sha256": h.hexdigest()}
        return out
    for key in keys:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"]
        h, size = hashlib.sha256(), 0
        for chunk in iter(lambda: body.read(CHUNK), b""):
            h.update(chunk)
            size += len(chunk)
        out[key] = {"size": size, "sha256": h.hexdigest()}
    return out


def file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def tree(root):
    out = []
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            full = os.path.join(folder, name)
            rel = "/" + os.path.relpath(full, root)
            st = os.lstat(full)
            entry = {"path": rel, "size": 0, "sha256": None, "target": None}
            if stat.S_ISLNK(st.st_mode):
                entry.update(kind="symlink", target=os.readlink(full))
            elif stat.S_ISDIR(st.st_mode):
                entry.update(kind="directory")
            elif stat.S_ISREG(st.st_mode):
                entry.update(kind="file", size=st.st_size, sha256=file_sha256(full))
            else:
                entry.update(kind="other")
            out.append(entry)
    return sorted(out, key=lambda e: e["path"])


def main(argv):
    command, arg = argv[1], argv[2]
    if command == "tree":
        result = tree(arg)
    else:
        s3 = client()
        if command == "create-bucket":
            s3.create_bucket(Bucket=arg)
            result = {"created": arg}
        elif command == "delete-bucket":
            for u in uploads(s3, arg):
                s3.abort_multipart_upload(Bucket=arg, Key=u["key"], UploadId=u["uploadId"])
            for o in objects(s3, arg):
                s3.delete_object(Bucket=arg, Key=o["key"])
            for v in versions(s3, arg):
                s3.delete_object(Bucket=arg, Key=v["key"], VersionId=v["versionId"])
            s3.delete_bucket(Bucket=arg)
            result = {"deleted": arg}
        elif command == "list":
            result = objects(s3, arg)
        elif command == "uploads":
            result = uploads(s3, arg)
        elif command == "put":
            made = s3.put_object(Bucket=arg, Key=argv[3], Body=argv[4].encode())
            result = {"put": argv[3], "versionId": made.get("VersionId")}
        elif command == "zero":
            size = s3.head_object(Bucket=arg, Key=argv[3])["ContentLength"]
            for v in versions(s3, arg, argv[3]):
                if v["key"] == argv[3] and v["versionId"] != "null":
                    s3.delete_object(Bucket=arg, Key=argv[3], VersionId=v["versionId"])
            s3.put_object(Bucket=arg, Key=argv[3], Body=bytes(size))
            result = {"zeroed": argv[3], "size": size}
        elif command == "versions":
            result = [v for v in versions(s3, arg, argv[3]) if v["key"] == argv[3]]
        elif command == "delete-version":
            s3.delete_object(Bucket=arg, Key=argv[3], VersionId=argv[4])
            result = {"deleted": argv[3], "versionId": argv[4]}
        elif command == "suspend-versioning":
            s3.put_bucket_versioning(Bucket=arg, VersioningConfiguration={"Status": "Suspended"})
            result = {"suspended": arg}
        elif command == "start-upload":
            # A multipart upload started with one part and never finished (a replica gone mid-upload).
            started = s3.create_multipart_upload(Bucket=arg, Key=argv[3])
            s3.upload_part(Bucket=arg, Key=argv[3], UploadId=started["UploadId"], PartNumber=1, Body=b"p" * 1024)
            result = {"uploadId": started["UploadId"]}
        elif command == "create-key":
            # An access key of user ARG (made with s3:* if missing): a key to rotate.
            iam = iam_client()
            try:
                iam.create_user(UserName=arg)
                iam.put_user_policy(UserName=arg, PolicyName="s3-all", PolicyDocument=json.dumps(
                    {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
            except iam.exceptions.EntityAlreadyExistsException:
                pass
            key = iam.create_access_key(UserName=arg)["AccessKey"]
            result = {"id": key["AccessKeyId"], "secret": key["SecretAccessKey"]}
        elif command == "create-user":
            # User ARG with the policy in file argv[3] (as `docfs remote add-replica` prints it), and a key.
            iam = iam_client()
            with open(argv[3]) as f:
                policy = f.read()
            iam.create_user(UserName=arg)
            iam.put_user_policy(UserName=arg, PolicyName="docfs-replica", PolicyDocument=policy)
            key = iam.create_access_key(UserName=arg)["AccessKey"]
            result = {"id": key["AccessKeyId"], "secret": key["SecretAccessKey"]}
        elif command == "delete":
            s3.delete_object(Bucket=arg, Key=argv[3])
            result = {"deleted": argv[3]}
        elif command == "get":
            result = {"size": len(s3.get_object(Bucket=arg, Key=argv[3])["Body"].read())}
        elif command == "delete-key":
            iam_client().delete_access_key(UserName=arg, AccessKeyId=argv[3])
            result = {"deleted": argv[3]}
        elif command == "session":
            # Temporary credentials with a session token: a role with s3:*, assumed.
            iam = iam_client()
            trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}]}
            try:
                role = iam.create_role(RoleName=arg, AssumeRolePolicyDocument=json.dumps(trust))["Role"]
                iam.put_role_policy(RoleName=arg, PolicyName="s3-all", PolicyDocument=json.dumps(
                    {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
            except iam.exceptions.EntityAlreadyExistsException:
                role = iam.get_role(RoleName=arg)["Role"]
            import boto3
            sts = boto3.client("sts", endpoint_url=os.environ["DOCFS_TEST_S3_ENDPOINT"], region_name="us-east-1",
                               aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
                               aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"])
            c = sts.assume_role(RoleArn=role["Arn"], RoleSessionName="docfs-test")["Credentials"]
            result = {"id": c["AccessKeyId"], "secret": c["SecretAccessKey"], "token": c["SessionToken"]}
        elif command == "read":
            # Keys of objects, or {key: [[pack, offset, length], ...]} of versions made of blocks.
            with open(argv[3]) as f:
                keys = json.load(f)
            if isinstance(keys, dict):
                packs, result = {}, {}
                for key, blocks in keys.items():
                    body = b""
                    for pack, offset, length in blocks:
                        if pack not in packs:
                            packs[pack] = s3.get_object(Bucket=arg, Key=pack)["Body"].read()
                        body += packs[pack][offset:offset + length]
                    result[key] = body.decode(errors="replace")
            else:
                result = {k: s3.get_object(Bucket=arg, Key=k)["Body"].read().decode(errors="replace") for k in keys}
        elif command == "digest":
            with open(argv[3]) as f:
                result = digest(s3, arg, json.load(f))
        else:
            raise SystemExit(f"s3check.py: unknown command {command}")
    json.dump(result, sys.stdout)


def run(argv):
    """A command as the command line runs it: its exit status."""
    try:
        main(argv)
        return 0
    except Exception as error:  # one line for the test's failure message
        print(f"s3check.py {' '.join(argv[1:3])}: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    except SystemExit as exit_:
        if exit_.code not in (None, 0):
            print(exit_.code, file=sys.stderr)
        return 0 if exit_.code in (None, 0) else 1


def serve(path):
    """Answers each connection of the socket at `path` in a child forked for it: boto3 is imported
    once, here (most of a separate process's second), and each command still runs alone, in its
    own environment and session, so one that hangs (a stopped moto) holds up no other."""
    import io
    import signal
    import socket
    import boto3  # noqa: F401  (imported for the children)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children reaped by the kernel
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    while True:
        conn, _ = listener.accept()
        if os.fork() != 0:
            conn.close()
            continue
        listener.close()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        data = b""
        while not data.endswith(b"\n"):
            chunk = conn.recv(1 << 16)
            if not chunk:
                break
            data += chunk
        out, err, status = io.StringIO(), io.StringIO(), 1
        try:
            request = json.loads(data)
            os.environ.update(request.get("env", {}))
            sys.stdout, sys.stderr = out, err
            status = run(["s3check.py"] + list(request["argv"]))
        except Exception as error:
            err.write(f"s3check.py serve: bad request: {error}")
        finally:
            sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
        try:
            conn.sendall((json.dumps({"status": status, "stdout": out.getvalue(), "stderr": err.getvalue()}) + "\n").encode())
        except OSError:
            pass  # the client gave up (its timeout)
        os._exit(0)


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(sys.argv[2])
    sys.exit(run(sys.argv))
