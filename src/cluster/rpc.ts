import { type ErrorCode, isReposyncError, ReposyncError } from "../errors.js";
import { untilAborted } from "../until-aborted.js";

/**
 * The messages between a cluster's primary and its workers (node:cluster's IPC channel, JSON).
 * Calls go both ways: a worker asks the primary for a package or for the cluster's metrics,
 * the primary asks a worker for its metrics. Notes need no answer: a prime request (worker to
 * primary), the end of a sync and the order to stop (primary to workers), a worker's start.
 */
export type ClusterMessage =
  | { readonly t: "call"; readonly id: number; readonly op: string; readonly args: unknown }
  | { readonly t: "cancel"; readonly id: number }
  | {
      readonly t: "reply";
      readonly id: number;
      readonly value?: unknown;
      readonly error?: { readonly code?: ErrorCode; readonly message: string };
    }
  | { readonly t: "listening"; readonly url: string }
  | { readonly t: "failed"; readonly message: string; readonly code?: ErrorCode }
  | { readonly t: "prime"; readonly remote: string }
  | { readonly t: "synced"; readonly remote: string; readonly failure?: string }
  | { readonly t: "stop" };

/** One end of an IPC channel: `process` in a worker, a `Worker` in the primary. */
export interface Channel {
  send(message: ClusterMessage): void;
  /** Subscribes to the other end's messages; returns the unsubscribe. */
  listen(listener: (message: ClusterMessage) => void): () => void;
}

/** A node IPC endpoint: `process` in a worker, a cluster `Worker` in the primary. */
export interface IpcEndpoint {
  send?: (message: ClusterMessage) => unknown;
  on(event: "message", listener: (message: unknown) => void): unknown;
  off(event: "message", listener: (message: unknown) => void): unknown;
}

/** The channel over `endpoint`; messages that are not ours are left to others. */
export function ipcChannel(endpoint: IpcEndpoint): Channel {
  return {
    send: (message) => {
      if (!endpoint.send) throw new Error("this process has no IPC channel");
      endpoint.send(message);
    },
    listen: (listener) => {
      const onMessage = (message: unknown) => {
        if (isClusterMessage(message)) listener(message);
      };
      endpoint.on("message", onMessage);
      return () => endpoint.off("message", onMessage);
    },
  };
}

/** True when `value` looks like one of our messages (the channel may carry others' too). */
export function isClusterMessage(value: unknown): value is ClusterMessage {
  return (
    typeof value === "object" && value !== null && typeof (value as { t?: unknown }).t === "string"
  );
}

/** A handler of one operation: the args as sent, a signal aborted when the caller leaves. */
export type Handler = (args: unknown, signal: AbortSignal) => Promise<unknown>;

/**
 * Calls and answers over one channel. A call's promise settles with the other end's answer,
 * or rejects at once when its signal aborts (the other end is told, and its handler's signal
 * aborts), or when close() is called (the channel died: the other process is gone).
 * Failures cross as code and message: a ReposyncError stays one with its code (so the server
 * maps it to the same HTTP status as in one process), anything else becomes a plain Error.
 */
export class Rpc {
  private nextId = 1;
  private readonly pending = new Map<
    number,
    { resolve: (value: unknown) => void; reject: (err: unknown) => void }
  >();
  private readonly running = new Map<number, AbortController>();
  private readonly unlisten: () => void;
  private closed: Error | undefined;

  constructor(
    private readonly channel: Channel,
    private readonly handlers: Readonly<Record<string, Handler>> = {},
  ) {
    this.unlisten = channel.listen((message) => this.receive(message));
  }

  /** Calls `op` on the other end. */
  call(op: string, args: unknown, signal?: AbortSignal): Promise<unknown> {
    if (this.closed) return Promise.reject(this.closed);
    if (signal?.aborted) return Promise.reject(signal.reason);
    const id = this.nextId++;
    const answer = new Promise<unknown>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
    });
    this.send({ t: "call", id, op, args });
    if (!signal) return answer;
    const left = untilAborted(answer, signal);
    const onAbort = () => {
      this.pending.delete(id);
      this.send({ t: "cancel", id });
    };
    signal.addEventListener("abort", onAbort, { once: true });
    answer.then(
      () => signal.removeEventListener("abort", onAbort),
      () => signal.removeEventListener("abort", onAbort),
    );
    return left;
  }

  /** Fails every call still waiting and aborts every handler still running: the other end is gone. */
  close(reason: Error): void {
    if (this.closed) return;
    this.closed = reason;
    this.unlisten();
    for (const { reject } of this.pending.values()) reject(reason);
    this.pending.clear();
    for (const controller of this.running.values()) controller.abort(reason);
    this.running.clear();
  }

  private send(message: ClusterMessage): void {
    if (this.closed) return;
    try {
      this.channel.send(message);
    } catch (err) {
      // A channel that cannot send is closed: nothing more will come back on it either.
      this.close(new ReposyncError("ABORTED", `the other process is gone: ${String(err)}`));
    }
  }

  private receive(message: ClusterMessage): void {
    switch (message.t) {
      case "reply": {
        const waiter = this.pending.get(message.id);
        if (!waiter) return;
        this.pending.delete(message.id);
        if (message.error) waiter.reject(toError(message.error));
        else waiter.resolve(message.value);
        return;
      }
      case "cancel":
        this.running.get(message.id)?.abort(new ReposyncError("ABORTED", "the caller left"));
        this.running.delete(message.id);
        return;
      case "call":
        void this.answer(message.id, message.op, message.args);
        return;
      default:
        return;
    }
  }

  private async answer(id: number, op: string, args: unknown): Promise<void> {
    const handler = this.handlers[op];
    if (!handler) {
      this.send({ t: "reply", id, error: { message: `no operation ${op} on this process` } });
      return;
    }
    const controller = new AbortController();
    this.running.set(id, controller);
    try {
      const value = await handler(args, controller.signal);
      if (this.running.delete(id)) this.send({ t: "reply", id, value });
    } catch (err) {
      if (this.running.delete(id)) this.send({ t: "reply", id, error: fromError(err) });
    }
  }
}

function fromError(err: unknown): { code?: ErrorCode; message: string } {
  if (isReposyncError(err)) return { code: err.code, message: err.message };
  return { message: err instanceof Error ? err.message : String(err) };
}

function toError(error: { code?: ErrorCode; message: string }): Error {
  return error.code ? new ReposyncError(error.code, error.message) : new Error(error.message);
}
