/**
 * A start that cannot hang on a server that died. The language client's `start()` settles when the
 * `initialize` answer comes or the connection reports its close; a process that exits in the instant
 * between spawn and the first write can leave it pending forever (seen once in CI: no message at all for
 * a Python without hp-lsp). The process's own `exit` event is the ground truth, so a start races it.
 * And a start can *resolve* on a dead server: vscode-languageclient 9's connection-closed handler clears the
 * pending start promise before `start()` returns it, so `start()` returns undefined (seen in CI when the close
 * was handled before the `exit` event: no message). So a start counts only if the client then says it runs.
 */

/** The connection closed while starting, and the client's start resolved anyway. */
export class NotRunningAfterStart extends Error {
  constructor() {
    super('the connection to the server closed while starting');
  }
}

/** The process ended before the server answered `initialize`. */
export class ExitedWhileStarting extends Error {
  constructor(readonly code: number | null, readonly signal: string | null) {
    super(signal ? `the server was killed by ${signal} while starting` : `the server exited with code ${code} while starting`);
  }
}

/** One start attempt's view of its process: `exited()` is called from the child's `exit` event. */
export class StartGuard {
  private rejectEarly: ((err: Error) => void) | undefined;
  private readonly early: Promise<never>;
  private settled = false;

  constructor() {
    this.early = new Promise<never>((_, reject) => {
      this.rejectEarly = reject;
    });
    this.early.catch(() => undefined); // no unhandled rejection when the process exits after a good start
  }

  /** The process exited: a start still waiting fails now. */
  exited(code: number | null, signal: string | null): void {
    if (!this.settled) {
      this.rejectEarly?.(new ExitedWhileStarting(code, signal));
    }
  }

  /** `start()`, failing as soon as the process exits if it has not answered by then, or when it returns with
   * the client not running (`running`, the client's own state). */
  async run(start: () => Promise<void>, running: () => boolean = () => true): Promise<void> {
    try {
      await Promise.race([start(), this.early]);
      if (!running()) {
        throw new NotRunningAfterStart();
      }
    } finally {
      this.settled = true;
    }
  }
}
