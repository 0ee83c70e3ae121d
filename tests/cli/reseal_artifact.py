"""Recomputes an artifact's checksums after its files were edited (each file's sha256 in the
manifest's "files", then the manifest's own checksum), as anyone can: the checksums protect
against accidents, not against edits. Tests use it to reach the runtime's other checks.

usage: reseal_artifact.py ARTIFACT_DIR
"""
import hashlib
import json
import os
import re
import sys


def reseal(art):
    manifest_path = os.path.join(art, "manifest.json")
    manifest = open(manifest_path).read()
    for name in json.loads(manifest)["files"]:
        digest = hashlib.sha256(open(os.path.join(art, name), "rb").read()).hexdigest()
        manifest = re.sub('("%s":\\s*")[0-9a-f]{64}' % re.escape(name), lambda m: m.group(1) + digest, manifest)
    m = re.search('"checksum":\\s*"([0-9a-f]{64})"', manifest)
    zeroed = manifest[:m.start(1)] + "0" * 64 + manifest[m.end(1):]
    sealed = hashlib.sha256(zeroed.encode()).hexdigest()
    open(manifest_path, "w").write(zeroed[:m.start(1)] + sealed + zeroed[m.end(1):])


if __name__ == "__main__":
    reseal(sys.argv[1])
