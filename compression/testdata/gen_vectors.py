#!/usr/bin/python3
"""Regenerates compression/testdata/vectors with implementations other than
the Go libraries samsa uses: GNU gzip, the lz4 and zstd reference CLIs
(Debian packages gzip, lz4, zstd) and Google's C++ snappy through
python3-snappy (Debian package python3-snappy). Xerial framing is built
here byte by byte from its specification. Run from compression/testdata:

    apt-get install -y gzip lz4 zstd python3-snappy
    /usr/bin/python3 gen_vectors.py

The tools used for the committed files: gzip 1.12, lz4 1.9.4, zstd 1.5.4,
python3-snappy 0.5.3 with libsnappy 1.1.9 (Debian bookworm).
"""
import json
import random
import struct
import subprocess

import snappy

OUT = "vectors/"


def records(n, seed):
    """JSON lines that look like keyed events, with realistic repetition."""
    rnd = random.Random(seed)
    users = ["user-%04d" % rnd.randrange(10000) for _ in range(50)]
    kinds = ["page_view", "click", "add_to_cart", "checkout", "login"]
    lines = []
    for i in range(n):
        ev = {
            "id": i,
            "ts": 1764420000000 + i * rnd.randrange(1, 50),
            "user": rnd.choice(users),
            "type": rnd.choice(kinds),
            "path": "/products/%d" % rnd.randrange(500),
            "score": round(rnd.random(), 4),
        }
        lines.append(json.dumps(ev, separators=(",", ":")))
    return ("\n".join(lines) + "\n").encode()


def run(args, data):
    return subprocess.run(args, input=data, check=True, capture_output=True).stdout


def write(name, data):
    with open(OUT + name, "wb") as f:
        f.write(data)


def xerial(data, chunk=32 * 1024):
    out = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    for i in range(0, len(data), chunk):
        block = snappy.compress(data[i : i + chunk])
        out += struct.pack(">i", len(block)) + block
    return out


def main():
    big = records(1000, 1)  # about 100 KiB: several 32 KiB and 64 KiB chunks
    tiny = b"hello, kafka"
    write("records.json", big)
    write("tiny.txt", tiny)
    for name, data in (("records.json", big), ("tiny.txt", tiny)):
        write(name + ".gz", run(["gzip", "-c", "-n", "-6"], data))
        write(name + ".lz4", run(["lz4", "-c", "-q"], data))
        # From a file, so that the frame records its content size.
        write(name + ".zst", run(["zstd", "-c", "-q", "-3", OUT + name], b""))
        write(name + ".snappy", snappy.compress(data))
        write(name + ".xerial", xerial(data))
    # Variants of the big input that exercise other header flags.
    write("records.json.multi.gz", run(["gzip", "-c", "-n", "-1"], big[:30000]) + run(["gzip", "-c", "-n", "-9"], big[30000:]))
    write("records.json.dep-b4-bx.lz4", run(["lz4", "-c", "-q", "-BD", "-B4", "-BX", "--content-size", "-9"], big))
    write("records.json.multi.lz4", run(["lz4", "-c", "-q", "-B4"], big[:40000]) + run(["lz4", "-c", "-q", "-B4"], big[40000:]))
    write("records.json.nocheck-19.zst", run(["zstd", "-c", "-q", "-19", "--no-check"], big))
    # Streamed through a pipe: no frame content size, window declared instead.
    write("records.json.stream.zst", run(["sh", "-c", "cat | zstd -c -q -3 --no-content-size"], big))
    write("records.json.multi.zst", run(["zstd", "-c", "-q"], big[:30000]) + run(["zstd", "-c", "-q"], big[30000:]))
    write("records.json.xerial-4k", xerial(big, 4096))


if __name__ == "__main__":
    main()
