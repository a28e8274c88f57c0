-- Minimal init for the headless Neovim tests: this repository's plugin on the runtimepath, nothing else.
-- Environment (set by tests/nvim/test_neovim.py): HP_REPO (repository root), HP_LSP_PYTHON (the
-- interpreter that has hp_lsp installed), HP_NVIM_LOG (where the Lua side writes its log).
local repo = assert(os.getenv('HP_REPO'), 'HP_REPO is not set')
vim.opt.runtimepath:prepend(repo .. '/editors/neovim')
vim.opt.runtimepath:append(repo .. '/tests/nvim')
vim.opt.swapfile = false
vim.opt.shadafile = 'NONE'
vim.opt.updatetime = 100
vim.cmd('filetype on')
require('vim.lsp.log').set_level(os.getenv('HP_NVIM_LSP_LOG_LEVEL') or 'WARN')
