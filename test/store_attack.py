#!/usr/bin/env python3
"""test/store_attack.py — the hostile side of test/e2e/faults_store.sh: talks to a running
env:// store (rank 0 of an mtrain job) the way a stranger on the network could.
Usage: store_attack.py PORT IDLE_SECONDS
Sends, each on its own connection: a forged hello (rank 1, right format, no valid MAC), a hello
signed with a wrong secret, a hello with a wrong WORLD_SIZE (unsigned), garbage, and a "huge
length" (a hello header followed by 8 MiB). Then opens 10 connections that say nothing and holds
them IDLE_SECONDS. Prints one line per attempt with what the store answered; exit 0 unless the
store could not be reached at all."""
import hashlib
import hmac
import os
import socket
import struct
import sys
import time

MAGIC, VERSION, HOST_BYTES = 0x5342544D, 3, 64
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
    return struct.pack("<6I", MAGIC, VERSION, rank, world, 4242, 0) + host


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


def main():
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
