import { parentPort } from "node:worker_threads";
import { type IndexedBatch, indexBatch } from "./index-batch.js";
import { READ_CHUNK } from "./package-file.js";

/**
 * Worker thread of `indexDirectory`: receives batches of files, answers with their joined XML.
 * Parsing and rendering are JavaScript, so threads are how `index` uses more than one core.
 */

/** A batch sent to a worker. */
export interface IndexWorkerRequest {
  readonly dir: string;
  readonly hrefs: readonly string[];
  readonly changelogLimit: number;
}

/** A worker's answer: the indexed batch, or the bug that stopped it. */
export type IndexWorkerResponse = { readonly batch: IndexedBatch } | { readonly error: string };

const port = parentPort;
if (port !== null) {
  const buffer = Buffer.allocUnsafe(READ_CHUNK);
  port.on("message", async (request: IndexWorkerRequest) => {
    try {
      const batch = await indexBatch(request.dir, request.hrefs, request.changelogLimit, buffer);
      const { primary, filelists, other } = batch.xml;
      // Transferred, not copied: the blocks are the bulk of what a worker produces.
      port.postMessage({ batch } satisfies IndexWorkerResponse, [
        primary.buffer,
        filelists.buffer,
        other.buffer,
      ]);
    } catch (err) {
      port.postMessage({
        error: err instanceof Error ? (err.stack ?? err.message) : String(err),
      } satisfies IndexWorkerResponse);
    }
  });
}
