#!/usr/bin/env python3
"""test/store_attack.py — the hostile side of test/e2e/faults_store.sh: talks to a running
env:// store (rank 0 of an mtrain job) the way a stranger on the network could.
Usage: store_attack.py PORT IDLE_SECONDS
       store_attack.py --impostor PORT   (be a store: listen on 127.0.0.1:PORT, answer one rank's
                                          hello with a host table it cannot have signed)
Sends, each on its own connection: a forged hello (rank 1, right format, no valid MAC), a hello
signed with a wrong secret, a hello with a wrong WORLD_SIZE (unsigned), garbage, and a "huge
length" (a hello header followed by 8 MiB). Then opens 10 connections that say nothing and holds
them IDLE_SECONDS. Prints one line per attempt with what the store answered; exit 0 unless the
store could not be reached at all. As --impostor it plays rank 0's store without the job's
secret: a nonce, then (whatever hello comes) a host table under a made-up proof; the rank must
refuse it. Wire format (parallel/bootstrap_env.c, protocol 4): challenge = magic, version,
32-byte nonce; hello = 6 u32 + 64-byte host + 32-byte rank nonce + 32-byte MAC; answer = magic,
32-byte proof, WORLD_SIZE x 64-byte host names."""
import hashlib
import hmac
import os
import socket
import struct
import sys
import time

MAGIC, VERSION, HOST_BYTES = 0x5342544D, 4, 64
LABEL = b"mtrain env:// hello\0"  # the C side hashes sizeof MAC_LABEL bytes: with the NUL


def connect(port):
    for _ in range(200):
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            time.sleep(0.05)
    sys.exit("store_attack: cannot connect to 127.0.0.1:%d" % port)


def hello_fields(rank, world):
    host = b"attacker".ljust(HOST_BYTES, b"\0")
    return struct.pack("<6I", MAGIC, VERSION, rank, world, 4242, 0) + host + os.urandom(32)


def answer(s):
    try:
        s.settimeout(8)
        data = s.recv(4096)
        return repr(data[8:120]) if data else "closed"
    except socket.timeout:
        return "no answer"
    except OSError as e:
        return "error %s" % e


def signed_attempt(port, name, rank, world, key):
    s = connect(port)
    ch = s.recv(40)
    nonce = ch[8:40]
    fields = hello_fields(rank, world)
    mac = b"\0" * 32
    if key:
        mac = hmac.new(key, LABEL + nonce + fields, hashlib.sha256).digest()
    s.sendall(fields + mac)
    print("%s: %s" % (name, answer(s)), flush=True)
    s.close()


def impostor(port):
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", port))
    srv.listen(4)
    print("impostor listening", flush=True)
    srv.settimeout(60)
    s, _ = srv.accept()
    s.settimeout(30)
    s.sendall(struct.pack("<2I", MAGIC, VERSION) + os.urandom(32))
    hello = b""
    while len(hello) < 24 + HOST_BYTES + 64:
        part = s.recv(4096)
        if not part:
            break
        hello += part
    world = struct.unpack("<6I", hello[:24])[3] if len(hello) >= 24 else 2
    table = b"".join(b"node".ljust(HOST_BYTES, b"\0") for _ in range(world))
    s.sendall(struct.pack("<I", MAGIC) + os.urandom(32) + table)
    print("impostor answered a hello of %d bytes" % len(hello), flush=True)
    try:
        s.recv(4096)  # the rank closes once it refused
    except OSError:
        pass
    s.close()
    srv.close()


def main():
    if sys.argv[1] == "--impostor":
        impostor(int(sys.argv[2]))
        return
    port, idle_s = int(sys.argv[1]), float(sys.argv[2])
    signed_attempt(port, "forged hello", 1, 2, None)
    signed_attempt(port, "wrong-secret hello", 1, 2, b"not the job's secret, but long enough")
    signed_attempt(port, "wrong WORLD_SIZE", 1, 3, None)
    s = connect(port)
    s.sendall(os.urandom(300))
    print("garbage: %s" % answer(s), flush=True)
    s.close()
    s = connect(port)
    try:
        s.sendall(struct.pack("<6I", MAGIC, VERSION, 1, 2, 0xFFFFFFFF, 0xFFFFFFFF) + b"\xff" * (8 << 20))
    except OSError:
        pass
    print("huge length: %s" % answer(s), flush=True)
    s.close()
    idle = [connect(port) for _ in range(10)]
    print("10 idle connections open", flush=True)
    time.sleep(idle_s)
    for s in idle:
        s.close()
    print("done", flush=True)


main()
