"""A TCP proxy with faults, between the replicas and the test servers (PostgreSQL, the S3 server),
for the randomized replica test (online_replicas.py). It runs in a thread of the test's own
process, listens on 127.0.0.1 only and forwards bytes unchanged to one upstream on 127.0.0.1.

Modes, switched at any time:
    pass    forward as they come
    delay   hold each chunk DELAY seconds before forwarding it (a slow link)
    stall   forward nothing (connections stay open, bytes wait): a link that hangs
    refuse  close new connections at once (a server that is down)
and `cut()` closes every open connection at once (a connection reset in the middle of whatever
it carried). Every loop is bounded: a closed proxy stops its connections and its listener.
"""
import asyncio
import threading


class FaultProxy:
    def __init__(self, upstream_port, name):
        self.upstream_port = upstream_port
        self.name = name
        self.mode = "pass"
        self.delay = 0.2
        self.cuts = 0
        self._writers = set()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fault-proxy-" + name, daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the fault proxy %s did not start" % name)

    # -- control (from the test's thread) --

    def set_mode(self, mode, delay=None):
        assert mode in ("pass", "delay", "stall", "refuse"), mode
        if delay is not None:
            self.delay = delay
        self.mode = mode
        # A stalled pipe waits on this event (in the proxy's loop), set when the stall is lifted.
        self._loop.call_soon_threadsafe(self._flowing.clear if mode == "stall" else self._flowing.set)

    def cut(self):
        """Closes every open connection (both sides), as a reset link does."""
        done = threading.Event()

        def close_all():
            for w in list(self._writers):
                w.transport.abort()
            self._writers.clear()
            done.set()

        self._loop.call_soon_threadsafe(close_all)
        done.wait(5)
        self.cuts += 1

    def close(self):
        def stop():
            for w in list(self._writers):
                w.transport.abort()
            self._server.close()
            self._loop.stop()

        self._loop.call_soon_threadsafe(stop)
        self._thread.join(10)

    # -- the proxy (the loop's thread) --

    def _run(self):
        asyncio.set_event_loop(self._loop)
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server = self._loop.run_until_complete(asyncio.start_server(self._accept, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _accept(self, reader, writer):
        if self.mode == "refuse":
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", self.upstream_port), 10)
        except (OSError, asyncio.TimeoutError):
            writer.transport.abort()
            return
        self._writers.update((writer, up_writer))
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer), return_exceptions=True)
        for w in (writer, up_writer):
            self._writers.discard(w)
            w.transport.abort()

    async def _pipe(self, reader, writer):
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                # Stalled: bytes wait until the test lifts the stall (bounded: 120 s at most).
                if self.mode == "stall":
                    try:
                        await asyncio.wait_for(self._flowing.wait(), 120)
                    except asyncio.TimeoutError:
                        pass
                if self.mode == "delay":
                    await asyncio.sleep(self.delay)  # the point of the delay mode: a slow link
                writer.write(data)
                await writer.drain()
        except (OSError, ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.transport.abort()
