#!/usr/bin/env python3
"""pause_image.py PAUSE OUT.tar REF: the pods' sandbox image as an OCI
image-layout tarball, for `ctr -n k8s.io images import` (no registry or
Docker needed): FROM scratch, /pause, USER 65535:65535, ENTRYPOINT
["/pause"], as Kubernetes' build/pause/Dockerfile makes it. PAUSE is the
binary scripts/test-deps.sh k8s-node builds from build/pause/linux/pause.c."""
import gzip
import hashlib
import io
import json
import sys
import tarfile


def tar_bytes(members):
    """A tar of (name, bytes, mode), times zeroed so the image is the same each time."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, data, mode in members:
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode, ti.mtime = len(data), mode, 0
            t.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def digest(b):
    return "sha256:" + hashlib.sha256(b).hexdigest()


def compact(obj):
    return json.dumps(obj, separators=(",", ":")).encode()


def image(binary, ref):
    layer = tar_bytes([("pause", binary, 0o755)])
    layer_gz = gzip.compress(layer, mtime=0)
    config = compact({
        "architecture": "amd64", "os": "linux",
        "config": {"User": "65535:65535", "Entrypoint": ["/pause"]},
        "rootfs": {"type": "layers", "diff_ids": [digest(layer)]},
    })
    manifest = compact({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest(config), "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": digest(layer_gz),
                    "size": len(layer_gz)}],
    })
    index = compact({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": digest(manifest),
                       "size": len(manifest), "platform": {"architecture": "amd64", "os": "linux"},
                       "annotations": {"io.containerd.image.name": ref,
                                       "org.opencontainers.image.ref.name": ref.rsplit(":", 1)[1]}}],
    })
    blobs = [("blobs/sha256/" + digest(b)[7:], b, 0o644) for b in (layer_gz, config, manifest)]
    return tar_bytes([("oci-layout", b'{"imageLayoutVersion":"1.0.0"}', 0o644), ("index.json", index, 0o644)] + blobs)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: pause_image.py PAUSE OUT.tar REF")
    with open(sys.argv[1], "rb") as f:
        data = image(f.read(), sys.argv[3])
    with open(sys.argv[2], "wb") as f:
        f.write(data)
