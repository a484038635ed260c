import { type Channel, isClusterMessage } from "./rpc.js";

/** The channel to the primary, from inside a worker (node:cluster's `process.send`). */
export function processChannel(): Channel {
  return {
    send: (message) => {
      if (!process.send) throw new Error("this process has no IPC channel to a primary");
      process.send(message);
    },
    listen: (listener) => {
      const onMessage = (message: unknown) => {
        if (isClusterMessage(message)) listener(message);
      };
      process.on("message", onMessage);
      return () => process.off("message", onMessage);
    },
  };
}
