"""A TCP proxy on loopback that delays every chunk it forwards, for e2e/faults/cluster.sh.

    python3 delay_proxy.py --listen PORT --to HOST:PORT --delay-file FILE

Standard library only (asyncio). The delay, in milliseconds, is read from FILE for each
chunk as it arrives (missing or empty: 0), so the suite turns a network delay on and off
without restarting anything. Each chunk is written DELAY after it arrived, in order; reading
goes on meanwhile, so the link gets slower, not narrower.
"""

import argparse
import asyncio


def delay_of(path: str) -> float:
    try:
        with open(path) as f:
            text = f.read().strip()
        return float(text) / 1000 if text else 0.0
    except (OSError, ValueError):
        return 0.0


async def pipe(reader, writer, delay_file):
    """Forwards reader to writer, each chunk DELAY after it arrived: latency, as a slow link
    adds it, not a cap on throughput (chunks read meanwhile are not held up behind it)."""
    queue = asyncio.Queue()
    loop = asyncio.get_running_loop()

    async def send():
        try:
            while True:
                due, chunk = await queue.get()
                if chunk is None:
                    break
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(chunk)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    sender = asyncio.create_task(send())
    try:
        while True:
            chunk = await reader.read(65536)
            if not chunk:
                break
            await queue.put((loop.time() + delay_of(delay_file), chunk))
    except (ConnectionError, OSError):
        pass
    finally:
        await queue.put((0, None))
        await sender


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", type=int, required=True)
    ap.add_argument("--to", required=True)
    ap.add_argument("--delay-file", required=True)
    args = ap.parse_args()
    host, port = args.to.rsplit(":", 1)

    async def serve(client_r, client_w):
        try:
            up_r, up_w = await asyncio.open_connection(host, int(port))
        except OSError:
            client_w.close()
            return
        await asyncio.gather(pipe(client_r, up_w, args.delay_file),
                             pipe(up_r, client_w, args.delay_file))

    server = await asyncio.start_server(serve, "127.0.0.1", args.listen)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
