-- User commands for hp_lsp. Nothing starts until require('hp_lsp').setup{...} is called (see README.md).
if vim.g.loaded_hp_lsp then
  return
end
vim.g.loaded_hp_lsp = true

vim.api.nvim_create_user_command('HpApplyOptimalStrategy', function()
  require('hp_lsp').apply_optimal_strategy(0)
end, { desc = 'HyperParallel: apply the optimal strategy to this file' })

vim.api.nvim_create_user_command('HpRestart', function()
  require('hp_lsp').restart()
end, { desc = 'HyperParallel: restart the language server' })

vim.api.nvim_create_user_command('HpShowSearchOutput', function()
  require('hp_lsp').show_log()
end, { desc = "HyperParallel: show the server's log (each search it ran)" })

vim.api.nvim_create_user_command('HpShowPlan', function()
  require('hp_lsp').show_plan(0)
end, { desc = 'HyperParallel: the plan per stage and its pipeline timeline in a scratch buffer' })

vim.api.nvim_create_user_command('HpSavePlanTrace', function(opts)
  require('hp_lsp').save_plan_trace(0, opts.args)
end, { nargs = '?', complete = 'file',
  desc = "HyperParallel: write the plan's predicted step as a Chrome trace (default: <file>.trace.json)" })
