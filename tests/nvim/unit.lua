-- The plugin's own logic, no server involved: file matching, settings, roots, client config, setup.
local T = require('hp_test')

T.run(function()
  local hp = require('hp_lsp')
  T.log('nvim ' .. tostring(vim.version().major) .. '.' .. tostring(vim.version().minor))

  -- File names.
  for _, name in ipairs({ '/a/train.yaml', '/a/train_llama.yml', '/a/TRAIN-70B.YAML', '/a/search.yaml', '/a/llama_search.yaml' }) do
    T.check(hp.matches_name(name), 'name matches ' .. name)
  end
  for _, name in ipairs({ '/a/retrain.yaml', '/train/config.yaml', '/a/train.json', '/a/compose.yaml' }) do
    T.check(not hp.matches_name(name), 'name does not match ' .. name)
  end

  -- Content sniff.
  local yes = {
    { '# c', 'accelerator:', '  tp_size: 4' },
    { 'model:', '  pretrained_model_name_or_path: meta-llama/Llama-3.1-8B' },
    { 'model:', '  name: x', 'train:', '  accelerator:', '    tp_degree: 2' },
    { 'cluster:', '  num_nodes: 8', '  cards_per_node: 8' },
    { 'train_yaml: ./train.yaml' },
  }
  for i, lines in ipairs(yes) do
    T.check(hp.looks_like_hyperparallel(lines), 'sniff accepts case ' .. i)
  end
  local no = {
    { 'apiVersion: v1', 'kind: Pod', 'spec:', '  containers: []' },
    { 'name: CI', 'jobs:', '  build:', '    runs-on: ubuntu-latest' },
    { 'spec:', '  device_type: gpu' },
    {},
  }
  for i, lines in ipairs(no) do
    T.check(not hp.looks_like_hyperparallel(lines), 'sniff rejects case ' .. i)
  end
  local padded = {}
  for _ = 1, 100 do
    table.insert(padded, 'a: 1')
  end
  table.insert(padded, 'accelerator:')
  T.check(not hp.looks_like_hyperparallel(padded), 'sniff reads only the first lines')

  -- Settings: bare section or already wrapped.
  T.eq(hp.settings_table({ cluster = { numNodes = 2 } }), { hpLsp = { cluster = { numNodes = 2 } } }, 'bare settings are wrapped')
  T.eq(hp.settings_table({ hpLsp = { searchOnSave = false } }), { hpLsp = { searchOnSave = false } }, 'wrapped settings kept')
  T.eq(hp.settings_table(nil), { hpLsp = {} }, 'no settings')

  -- Roots.
  local work = vim.fn.tempname()
  vim.fn.mkdir(work .. '/proj/.git', 'p')
  vim.fn.mkdir(work .. '/proj/configs/llama', 'p')
  vim.fn.mkdir(work .. '/loose', 'p')
  T.eq(hp.find_root(work .. '/proj/configs/llama/train.yaml', { '.git' }), work .. '/proj', 'root at the .git ancestor')
  T.eq(hp.find_root(work .. '/loose/train.yaml', { 'no-such-marker' }), work .. '/loose', "root falls back to the file's folder")

  -- Buffers.
  local function buffer(path, lines)
    local f = io.open(path, 'w')
    f:write(table.concat(lines, '\n'), '\n')
    f:close()
    vim.cmd('edit ' .. vim.fn.fnameescape(path))
    return vim.api.nvim_get_current_buf()
  end
  local attached = {}
  local real_attach = hp.attach
  hp.attach = function(bufnr)
    table.insert(attached, bufnr)
  end
  hp.setup({ cmd = { 'true' }, settings = { memoryLimitGb = 60 } })
  local by_name = buffer(work .. '/proj/configs/llama/train.yaml', { 'model:', '  name: x' })
  T.eq(vim.bo[by_name].filetype, 'yaml', 'train.yaml has filetype yaml')
  local by_content = buffer(work .. '/proj/configs/base.yaml', { 'fsdp_config:', '  dp_shard_size: 8' })
  local other = buffer(work .. '/proj/configs/values.yaml', { 'replicas: 3' })
  local not_yaml = buffer(work .. '/proj/configs/train.txt', { 'accelerator:' })
  T.eq(attached, { by_name, by_content }, 'setup attaches HyperParallel YAML buffers only')
  T.check(not hp.is_hp_buffer(other), 'plain YAML is not attached')
  T.check(not vim.tbl_contains(attached, not_yaml), 'non-YAML is not attached')
  hp.attach = real_attach

  -- A custom match function replaces the default choice.
  attached = {}
  hp.attach = function(bufnr)
    table.insert(attached, bufnr)
  end
  hp.setup({ match = function() return true end })
  T.eq(attached, { by_name, by_content, other }, 'setup attaches the YAML buffers already open')
  local any = buffer(work .. '/proj/configs/anything.yaml', { 'a: 1' })
  T.eq(attached, { by_name, by_content, other, any }, 'custom match attaches every YAML buffer')

  -- The client config: settings in init_options and pushed on init.
  hp.setup({ cmd = { '/venv/bin/python', '-m', 'hp_lsp' }, settings = { cluster = { numNodes = 4 } } })
  hp.attach = real_attach

  local cfg = hp.client_config(by_name)
  T.eq(cfg.name, 'hp_lsp', 'client name')
  T.eq(cfg.cmd, { '/venv/bin/python', '-m', 'hp_lsp' }, 'client cmd')
  T.eq(cfg.root_dir, work .. '/proj', 'client root_dir')
  T.eq(cfg.init_options, { hpLsp = { cluster = { numNodes = 4 } } }, 'init_options carry the hpLsp section')
  T.eq(cfg.settings, cfg.init_options, 'settings equal init_options')
  T.check(cfg.capabilities.workspace.codeLens.refreshSupport == true, 'advertises codeLens refresh support')
  local sent = {}
  local fake = { config = { settings = cfg.settings } }
  fake.notify = function(a, b, c)
    -- dot style (<= 0.10): (method, params); colon style (0.11+): (self, method, params)
    if a == fake then
      table.insert(sent, { b, c })
    else
      table.insert(sent, { a, b })
    end
    return true
  end
  T.check(cfg.on_init(fake, {}) == true, 'on_init returns true')
  T.eq(sent, { { 'workspace/didChangeConfiguration', { settings = { hpLsp = { cluster = { numNodes = 4 } } } } } },
    'on_init pushes the settings with didChangeConfiguration')

  -- The user commands from plugin/hp_lsp.lua.
  for _, name in ipairs({ 'HpApplyOptimalStrategy', 'HpRestart', 'HpShowSearchOutput' }) do
    T.check(vim.fn.exists(':' .. name) == 2, 'command :' .. name .. ' exists')
  end
  T.check(hp.apply_optimal_strategy(other) == false, 'apply without a server says so')

  -- The log buffer.
  hp.log = { 'search: 1 line' }
  hp.show_log()
  T.eq(vim.api.nvim_buf_get_lines(0, 0, -1, false), { 'search: 1 line' }, ':HpShowSearchOutput shows the log')
end)
