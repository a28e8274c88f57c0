/**
 * The last words of the server's stderr, for the one message shown when the server cannot start (a Python
 * without hp-lsp says `No module named hp_lsp`; a broken install prints its traceback's last line).
 */

/** Keeps the last non-empty line written to a stream, reading chunks as they come (lines may split). */
export class StderrTail {
  private partial = '';
  private last: string | undefined;
  private closed = false;
  private waiters: (() => void)[] = [];

  push(chunk: string): void {
    const lines = (this.partial + chunk).split(/\r?\n/);
    this.partial = lines.pop() ?? '';
    for (const line of lines) {
      if (line.trim()) {
        this.last = line.trim();
      }
    }
  }

  /** The stream ended: what is left unterminated counts as a line. */
  close(): void {
    if (this.partial.trim()) {
      this.last = this.partial.trim();
    }
    this.partial = '';
    this.closed = true;
    for (const w of this.waiters.splice(0)) {
      w();
    }
  }

  /** The last non-empty line, once the stream closed or `waitMs` passed (a dying process's stderr can arrive
   * just after its stdout closed the connection). */
  async lastLine(waitMs = 1000): Promise<string | undefined> {
    if (!this.closed) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, waitMs);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    const pending = this.partial.trim();
    return pending || this.last;
  }
}
