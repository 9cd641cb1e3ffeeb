#!/usr/bin/env python3
"""A TCP gate in front of a server, for the tests of what a replica does whatever its server
answers. Usage: tcpgate.py TARGET_PORT MODE_FILE PORT_FILE

Listens on 127.0.0.1 (a free port, written to PORT_FILE once listening) and, for each connection,
does what MODE_FILE says at that moment:
  forward  pass the bytes both ways to 127.0.0.1:TARGET_PORT
  silent   accept, read, and never answer
  garbage  answer every read with bytes that are no protocol's, then close
  close    close at once
When MODE_FILE changes, every open connection is cut, so what comes next meets the new mode.
Runs until killed (the tests stop it by its PID)."""
import os, socket, sys, threading, time

target_port, mode_file, port_file = int(sys.argv[1]), sys.argv[2], sys.argv[3]
lock = threading.Lock()
open_sockets = set()


def mode():
    try:
        with open(mode_file) as f:
            return f.read().strip() or "forward"
    except OSError:
        return "forward"


def track(*socks):
    with lock:
        open_sockets.update(socks)


def cut(*socks):
    for s in socks:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            s.close()
        except OSError:
            pass
    with lock:
        open_sockets.difference_update(socks)


def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    cut(src, dst)


def serve(client):
    m = mode()
    track(client)
    if m == "forward":
        try:
            server = socket.create_connection(("127.0.0.1", target_port), 5)
            server.settimeout(None)
        except OSError:
            cut(client)
            return
        track(server)
        threading.Thread(target=pump, args=(server, client), daemon=True).start()
        pump(client, server)
    elif m == "silent":
        try:
            while client.recv(65536):
                pass
        except OSError:
            pass
        cut(client)
    elif m == "garbage":
        try:
            while client.recv(65536):
                client.sendall(b"\xff\x00garbage\x00" * 64)
                break
        except OSError:
            pass
        cut(client)
    else:
        cut(client)


def watch():
    last = mode()
    while True:
        time.sleep(0.1)
        now = mode()
        if now != last:
            last = now
            with lock:
                sockets = list(open_sockets)
            cut(*sockets)


listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", 0))
listener.listen(64)
with open(port_file + ".tmp", "w") as f:
    f.write(str(listener.getsockname()[1]))
os.rename(port_file + ".tmp", port_file)
threading.Thread(target=watch, daemon=True).start()
while True:
    conn, _ = listener.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
