/**
 * A stand-in for the `vscode` module under node's test runner (bundled in place of `vscode` by esbuild's
 * alias, see esbuild.mjs). It implements only what src/ calls, records what the extension does, and lets a
 * test drive events through `stub`.
 */

type Listener<T> = (e: T) => unknown;

export class Disposable {
  constructor(private readonly fn: () => unknown = () => undefined) {}
  dispose(): void {
    this.fn();
  }
}

export class EventEmitter<T> {
  private listeners: Listener<T>[] = [];
  readonly event = (listener: Listener<T>): Disposable => {
    this.listeners.push(listener);
    return new Disposable(() => {
      this.listeners = this.listeners.filter((l) => l !== listener);
    });
  };
  fire(e: T): void {
    for (const l of [...this.listeners]) {
      l(e);
    }
  }
  dispose(): void {
    this.listeners = [];
  }
}

export class Uri {
  private constructor(
    readonly scheme: string,
    readonly fsPath: string,
  ) {}
  static file(path: string): Uri {
    return new Uri('file', path);
  }
  static parse(value: string): Uri {
    const m = /^([a-z][\w+.-]*):(?:\/\/)?(.*)$/i.exec(value);
    return m ? new Uri(m[1], m[1] === 'file' ? decodeURIComponent(m[2]) : m[2]) : new Uri('file', value);
  }
  toString(): string {
    return this.scheme === 'file' ? `file://${encodeURI(this.fsPath)}` : `${this.scheme}:${this.fsPath}`;
  }
}

export interface StubDocument {
  uri: Uri;
  languageId: string;
  getText(): string;
}

export interface StubLog {
  level: 'info' | 'warn' | 'error' | 'trace' | 'debug' | 'line';
  text: string;
}

class OutputChannel {
  readonly lines: StubLog[] = [];
  shown = 0;
  constructor(readonly name: string) {}
  info(text: string): void {
    this.lines.push({ level: 'info', text });
  }
  warn(text: string): void {
    this.lines.push({ level: 'warn', text });
  }
  error(text: string): void {
    this.lines.push({ level: 'error', text });
  }
  trace(text: string): void {
    this.lines.push({ level: 'trace', text });
  }
  debug(text: string): void {
    this.lines.push({ level: 'debug', text });
  }
  appendLine(text: string): void {
    this.lines.push({ level: 'line', text });
  }
  show(): void {
    this.shown += 1;
  }
  dispose(): void {}
}

function lookup(tree: Record<string, unknown>, dotted: string): unknown {
  if (dotted in tree) {
    return tree[dotted];
  }
  let node: unknown = tree;
  for (const part of dotted.split('.')) {
    if (!node || typeof node !== 'object') {
      return undefined;
    }
    node = (node as Record<string, unknown>)[part];
  }
  return node;
}

/** Test control: state the stub exposes and helpers to fire events. */
export const stub = {
  /** Settings by full dotted name, e.g. `hpLsp.cluster.numNodes`. */
  config: {} as Record<string, unknown>,
  documents: [] as StubDocument[],
  activeDocument: undefined as StubDocument | undefined,
  commands: new Map<string, (...args: unknown[]) => unknown>(),
  executed: [] as { command: string; args: unknown[] }[],
  messages: [] as { level: 'info' | 'warning' | 'error'; text: string }[],
  channels: [] as OutputChannel[],
  extensions: new Map<string, { isActive: boolean; exports: unknown; activate(): Promise<unknown> }>(),
  folders: [] as { uri: Uri; name: string; index: number }[],
  onDidOpen: new EventEmitter<StubDocument>(),
  onDidChangeConfig: new EventEmitter<{ affectsConfiguration(section: string): boolean }>(),

  reset(): void {
    this.config = {};
    this.documents = [];
    this.activeDocument = undefined;
    this.commands.clear();
    this.executed = [];
    this.messages = [];
    this.channels = [];
    this.extensions.clear();
    this.folders = [];
    this.onDidOpen = new EventEmitter();
    this.onDidChangeConfig = new EventEmitter();
  },

  document(path: string, text: string, languageId = 'yaml'): StubDocument {
    return { uri: Uri.file(path), languageId, getText: () => text };
  },

  open(doc: StubDocument): void {
    this.documents.push(doc);
    this.onDidOpen.fire(doc);
  },

  /** Change settings (full dotted names) and fire onDidChangeConfiguration for them. */
  changeConfig(values: Record<string, unknown>): void {
    Object.assign(this.config, values);
    const keys = Object.keys(values);
    this.onDidChangeConfig.fire({
      affectsConfiguration: (section: string) => keys.some((k) => k === section || k.startsWith(`${section}.`)),
    });
  },
};

export const window = {
  createOutputChannel(name: string): OutputChannel {
    const channel = new OutputChannel(name);
    stub.channels.push(channel);
    return channel;
  },
  get activeTextEditor(): { document: StubDocument } | undefined {
    return stub.activeDocument ? { document: stub.activeDocument } : undefined;
  },
  showInformationMessage(text: string): Promise<undefined> {
    stub.messages.push({ level: 'info', text });
    return Promise.resolve(undefined);
  },
  showWarningMessage(text: string): Promise<undefined> {
    stub.messages.push({ level: 'warning', text });
    return Promise.resolve(undefined);
  },
  showErrorMessage(text: string): Promise<undefined> {
    stub.messages.push({ level: 'error', text });
    return Promise.resolve(undefined);
  },
};

export const commands = {
  registerCommand(id: string, fn: (...args: unknown[]) => unknown): Disposable {
    if (stub.commands.has(id)) {
      throw new Error(`command '${id}' already exists`);
    }
    stub.commands.set(id, fn);
    return new Disposable(() => stub.commands.delete(id));
  },
  executeCommand(command: string, ...args: unknown[]): Promise<unknown> {
    stub.executed.push({ command, args });
    const fn = stub.commands.get(command);
    return Promise.resolve(fn?.(...args));
  },
};

export const workspace = {
  getConfiguration(section?: string): { get<T>(key: string): T | undefined } {
    return {
      get<T>(key: string): T | undefined {
        return lookup(stub.config, section ? `${section}.${key}` : key) as T | undefined;
      },
    };
  },
  get textDocuments(): StubDocument[] {
    return stub.documents;
  },
  onDidOpenTextDocument(listener: Listener<StubDocument>): Disposable {
    return stub.onDidOpen.event(listener);
  },
  onDidChangeConfiguration(listener: Listener<{ affectsConfiguration(section: string): boolean }>): Disposable {
    return stub.onDidChangeConfig.event(listener);
  },
  get workspaceFolders(): { uri: Uri; name: string; index: number }[] | undefined {
    return stub.folders.length ? stub.folders : undefined;
  },
  getWorkspaceFolder(uri: Uri): { uri: Uri; name: string; index: number } | undefined {
    return stub.folders.find((f) => uri.fsPath.startsWith(`${f.uri.fsPath}/`));
  },
};

export const extensions = {
  getExtension(id: string): unknown {
    return stub.extensions.get(id);
  },
};

// ---- Plan view (src/planView.ts): webview panels and document saves --------------------------------------
export const ViewColumn = { Active: -1, Beside: -2, One: 1, Two: 2 } as const;

export class StubPanel {
  readonly webview = { html: '' };
  revealed = 0;
  disposed = false;
  private readonly disposeListeners = new EventEmitter<void>();
  constructor(
    readonly viewType: string,
    readonly title: string,
    readonly options: unknown,
  ) {}
  reveal(): void {
    this.revealed += 1;
  }
  onDidDispose(listener: Listener<void>): Disposable {
    return this.disposeListeners.event(listener);
  }
  dispose(): void {
    this.disposed = true;
    this.disposeListeners.fire();
  }
}

export const planStub = {
  panels: [] as StubPanel[],
  onDidSave: new EventEmitter<StubDocument>(),
  /** What the save dialog answers (undefined: cancelled) and the options it was opened with. */
  saveTarget: undefined as Uri | undefined,
  saveDialogs: [] as { defaultUri?: Uri; filters?: Record<string, string[]> }[],
  reset(): void {
    this.panels = [];
    this.onDidSave = new EventEmitter();
    this.saveTarget = undefined;
    this.saveDialogs = [];
  },
};

Object.assign(window, {
  showSaveDialog(options: { defaultUri?: Uri; filters?: Record<string, string[]> }): Promise<Uri | undefined> {
    planStub.saveDialogs.push(options);
    return Promise.resolve(planStub.saveTarget);
  },
  createWebviewPanel(viewType: string, title: string, _column: unknown, options: unknown): StubPanel {
    const panel = new StubPanel(viewType, title, options);
    planStub.panels.push(panel);
    return panel;
  },
});
Object.assign(workspace, {
  onDidSaveTextDocument(listener: Listener<StubDocument>): Disposable {
    return planStub.onDidSave.event(listener);
  },
});
