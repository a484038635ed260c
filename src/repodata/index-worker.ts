import { parentPort } from "node:worker_threads";
import { indexPackageFile, type PackageFileOutcome, READ_CHUNK } from "./package-file.js";

/**
 * Worker thread of `indexDirectory`: receives batches of files, answers with their outcomes.
 * Parsing and rendering are JavaScript, so threads are how `index` uses more than one core.
 */

/** A batch sent to a worker. */
export interface IndexWorkerRequest {
  readonly dir: string;
  readonly hrefs: readonly string[];
  readonly changelogLimit: number;
}

/** A worker's answer: outcomes in the order of the request, or the bug that stopped it. */
export type IndexWorkerResponse =
  | { readonly outcomes: readonly PackageFileOutcome[] }
  | { readonly error: string };

const port = parentPort;
if (port !== null) {
  const buffer = Buffer.allocUnsafe(READ_CHUNK);
  port.on("message", async (request: IndexWorkerRequest) => {
    try {
      const outcomes: PackageFileOutcome[] = [];
      for (const href of request.hrefs) {
        outcomes.push(await indexPackageFile(request.dir, href, request.changelogLimit, buffer));
      }
      port.postMessage({ outcomes } satisfies IndexWorkerResponse);
    } catch (err) {
      port.postMessage({
        error: err instanceof Error ? (err.stack ?? err.message) : String(err),
      } satisfies IndexWorkerResponse);
    }
  });
}
