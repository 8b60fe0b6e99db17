# A missing settings file under the home directory causes a config error carrying a DSN (Ruby prints the cause).
class ConfigError < StandardError; end

def read_settings
  File.read(File.join(Dir.home, "app", "config", "settings.yml"))
end

def connect_database(tenant)
  read_settings
rescue Errno::ENOENT
  raise ConfigError, "no settings for tenant #{tenant}, fallback #{ENV.fetch('DB_DSN')} refused (E2203)"
end

connect_database("acme-corp")
