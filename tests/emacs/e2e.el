;;; e2e.el --- Emacs + eglot against hp_lsp, headless  -*- lexical-binding: t -*-
;; emacs -Q --batch -l tests/emacs/e2e.el
;; The file is $HP_FILE (a copy of examples/llama3-70b/train.yaml beside its search.yaml); $HP_LSP_PYTHON
;; runs the server; each check is logged to $HP_EMACS_LOG; exit 0 when all passed. The block marked USER
;; is the set-up editors/README.md gives Emacs users.

(defvar hp-fails 0)
(defun hp-log (fmt &rest args)
  (let ((line (apply #'format fmt args)))
    (with-temp-buffer
      (insert line "\n")
      (append-to-file (point-min) (point-max) (getenv "HP_EMACS_LOG")))))
(defun hp-check (ok name &optional detail)
  (hp-log "%s %s%s" (if ok "ok  " "FAIL") name (if (and detail (not ok)) (format ": %S" detail) ""))
  (unless ok (setq hp-fails (1+ hp-fails)))
  ok)
(defun hp-wait (seconds pred)
  "Pump process output until PRED is true or SECONDS passed; PRED's value."
  (let ((end (+ (float-time) seconds)) v)
    (while (and (not (setq v (funcall pred))) (< (float-time) end))
      (accept-process-output nil 0.05))
    v))

;;; --- USER: eglot (Debian: apt-get install elpa-eglot; Emacs 29+ has it built in) --------------------
(dolist (dir (file-expand-wildcards "/usr/share/emacs/site-lisp/elpa/*"))
  (add-to-list 'load-path dir))
(require 'eglot)
(unless (fboundp 'yaml-mode)            ; Emacs 28 has no YAML mode; yaml-mode from MELPA works the same
  (define-derived-mode yaml-mode prog-mode "YAML"))
(add-to-list 'auto-mode-alist '("\\.ya?ml\\'" . yaml-mode))
(defvar hp-lsp-python "python3" "The Python where hp-lsp is installed.")
(add-to-list 'eglot-server-programs
             `(yaml-mode . ,(lambda (&rest _) (list hp-lsp-python "-m" "hp_lsp"))))
;;; --- end USER --------------------------------------------------------------------------------------
(setq hp-lsp-python (getenv "HP_LSP_PYTHON"))

(defun hp-diags () (flymake-diagnostics))
(defun hp-find (re)
  (seq-find (lambda (d) (string-match-p re (flymake-diagnostic-text d))) (hp-diags)))
(defun hp-comments ()
  (let (out)
    (dolist (line (split-string (buffer-string) "\n"))
      (when (string-match "#\\s-*\\(.*\\)$" line)
        (push (replace-regexp-in-string "\\`was .*?: " "" (match-string 1 line)) out)))
    (nreverse out)))
(defun hp-line (re)
  (save-excursion (goto-char (point-min)) (when (re-search-forward re nil t) (buffer-substring (line-beginning-position) (line-end-position)))))

(defun hp-run ()
  (let ((file (getenv "HP_FILE")))  ; outside any VCS: eglot's project is the file's folder
    (find-file file)
    (hp-check (eq major-mode 'yaml-mode) "yaml-mode")
    (apply #'eglot (eglot--guess-contact))
    (hp-check (hp-wait 30 #'eglot-current-server) "eglot connected")
    (let ((before (buffer-string)) (comments (hp-comments)) diag)
      ;; 1. Diagnostics: batch Emacs never runs the hook flymake waits for, so start it by hand.
      (setq diag (hp-wait 120 (lambda () (flymake-start) (hp-find "faster fits"))))
      (unless (hp-check diag "HP611 (a faster plan fits) in flymake" (mapcar #'flymake-diagnostic-text (hp-diags)))
        (error "no search diagnostic"))
      ;; 2. Hover on tp_size: GiB and seconds.
      (goto-char (point-min))
      (re-search-forward "^\\s-+tp_size:")
      (goto-char (+ (line-beginning-position) 3))
      (let* ((res (jsonrpc-request (eglot-current-server) :textDocument/hover
                                   (eglot--TextDocumentPositionParams)))
             (contents (plist-get res :contents))
             (text (if (stringp contents) contents (or (plist-get contents :value) (format "%S" contents)))))
        (hp-check (and (string-match-p "[0-9] GiB" text) (string-match-p "[0-9]\\.[0-9]+ s\\b" text))
                  "hover shows GiB and seconds" text))
      ;; 3. The quick fix at the diagnostic: "Apply optimal strategy" (the only quickfix there) applied.
      (goto-char (flymake-diagnostic-beg diag))
      (eglot-code-actions (flymake-diagnostic-beg diag) (flymake-diagnostic-end diag) "quickfix" t)
      (hp-check (not (equal before (buffer-string))) "the quick fix changed the buffer")
      (hp-check (string-match-p "pp_size: 1" (or (hp-line "^\\s-+pp_size:") ""))
                "pp_size is the best plan's 1"
                (hp-line "^\\s-+pp_size:"))
      (hp-check (equal comments (hp-comments)) "every comment kept" (hp-comments))
      (hp-check (string-match-p "# was 5: " (or (hp-line "^\\s-+pp_interleave_num:") "")) "the stale comment is marked"
                (hp-line "^\\s-+pp_interleave_num:")))))

(condition-case err
    (hp-run)
  (error (hp-check nil "script ran to the end" err)))
(hp-log (if (zerop hp-fails) "PASSED" (format "FAILED %d" hp-fails)))
(ignore-errors (eglot-shutdown (eglot-current-server)))
(kill-emacs (if (zerop hp-fails) 0 1))
