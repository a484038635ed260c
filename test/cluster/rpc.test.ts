import { MessageChannel, type MessagePort } from "node:worker_threads";
import { afterEach, describe, expect, it } from "vitest";
import { type Channel, type ClusterMessage, ipcChannel, Rpc } from "../../src/cluster/rpc.js";
import { isReposyncError, ReposyncError } from "../../src/errors.js";
import { deferred } from "../packages/deferred.js";

/**
 * One end of a real message channel (worker_threads' MessagePort: asynchronous, copying), so the
 * two Rpc ends talk as the cluster's processes do, through messages only.
 */
function portChannel(port: MessagePort): Channel {
  return ipcChannel({
    send: (message) => port.postMessage(message),
    on: (event, listener) => port.on(event, listener),
    off: (event, listener) => port.off(event, listener),
  });
}

const ports: MessagePort[] = [];
afterEach(() => {
  for (const p of ports.splice(0)) p.close();
});

/** Two ends: `caller` calls, `answerer` has the handlers; `seen` is what reached the answerer. */
function pair(handlers: ConstructorParameters<typeof Rpc>[1]) {
  const { port1, port2 } = new MessageChannel();
  ports.push(port1, port2);
  const seen: ClusterMessage[] = [];
  const answererChannel = portChannel(port2);
  answererChannel.listen((m) => seen.push(m));
  return {
    caller: new Rpc(portChannel(port1)),
    answerer: new Rpc(answererChannel, handlers),
    seen,
  };
}

describe("Rpc between a cluster's processes", () => {
  it("answers a call with the handler's value, and concurrent calls each with their own", async () => {
    const { caller } = pair({
      double: async (args) => (args as { n: number }).n * 2,
    });
    const answers = await Promise.all([1, 2, 3].map((n) => caller.call("double", { n })));
    expect(answers).toEqual([2, 4, 6]);
  });

  it("keeps a ReposyncError's code across, and turns anything else into a plain Error", async () => {
    const { caller } = pair({
      mismatch: async () => {
        throw new ReposyncError("UPSTREAM_MISMATCH", "sha256 differs");
      },
      bug: async () => {
        throw new TypeError("x is undefined");
      },
    });
    const coded = await caller.call("mismatch", null).catch((e: unknown) => e);
    expect(isReposyncError(coded, "UPSTREAM_MISMATCH")).toBe(true);
    expect((coded as Error).message).toBe("sha256 differs");
    const plain = await caller.call("bug", null).catch((e: unknown) => e);
    expect(isReposyncError(plain)).toBe(false);
    expect((plain as Error).message).toBe("x is undefined");
    const unknown = await caller.call("nothing", null).catch((e: unknown) => e);
    expect((unknown as Error).message).toContain("no operation nothing");
  });

  it("a caller that aborts leaves at once, and the handler's signal aborts on the other side", async () => {
    const started = deferred();
    const handlerAborted = deferred<unknown>();
    const { caller } = pair({
      slow: (_args, signal) => {
        started.resolve();
        return new Promise((_resolve, reject) => {
          signal.addEventListener("abort", () => {
            handlerAborted.resolve(signal.reason);
            reject(signal.reason);
          });
        });
      },
    });
    const controller = new AbortController();
    const call = caller.call("slow", null, controller.signal);
    await started.promise;
    controller.abort(new Error("client went away"));
    await expect(call).rejects.toThrow("client went away");
    const reason = await handlerAborted.promise;
    expect(isReposyncError(reason, "ABORTED")).toBe(true);
  });

  it("a call whose signal is already aborted is never sent", async () => {
    const { caller, seen } = pair({ ping: async () => "pong" });
    const controller = new AbortController();
    controller.abort(new Error("gone"));
    await expect(caller.call("ping", null, controller.signal)).rejects.toThrow("gone");
    // A later call is answered, and it is the only call the other side ever saw.
    expect(await caller.call("ping", null)).toBe("pong");
    expect(seen.filter((m) => m.t === "call")).toHaveLength(1);
  });

  it("close() fails the calls still waiting and aborts the handlers still running", async () => {
    const started = deferred();
    const handlerAborted = deferred();
    const { caller, answerer } = pair({
      hang: (_args, signal) => {
        started.resolve();
        signal.addEventListener("abort", () => handlerAborted.resolve());
        return new Promise(() => {});
      },
    });
    const call = caller.call("hang", null);
    await started.promise;
    // The answering process is gone: its handlers stop, and the caller learns it from its own close.
    answerer.close(new Error("worker exited"));
    await handlerAborted.promise;
    caller.close(new ReposyncError("ABORTED", "the primary is gone"));
    await expect(call).rejects.toThrow("the primary is gone");
    await expect(caller.call("hang", null)).rejects.toThrow("the primary is gone");
  });

  it("a channel that can no longer send closes its end: the call fails instead of hanging", async () => {
    const broken: Channel = {
      send: () => {
        throw new Error("channel closed");
      },
      listen: () => () => {},
    };
    const rpc = new Rpc(broken);
    await expect(rpc.call("anything", null)).rejects.toThrow("channel closed");
  });
});
